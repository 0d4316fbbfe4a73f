package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"sync"
)

// Neighbour table parameters. Words among the most frequent nbMinRow have
// no neighbours (their neighbours are other function words) and the
// most frequent nbMinRow/2 are never anyone's neighbour; a neighbour
// needs cosine ≥ nbMinSim; nbK per word.
const (
	nbMinRow = 500
	nbMinSim = 0.6
	nbK      = 3
)

// runNeighbours reads a wordvec.bin and writes the neighbour table. Format
// (little endian): "TGNB1", uint32 rows (the word table's), uint8 k, then
// per row k entries of uint16 neighbour row + uint8 cosine×255 (row 0xFFFF
// = none). Rows follow wordvec.bin, whose words it does not repeat.
func runNeighbours(in, out string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return fmt.Errorf("reading word vectors: %w", err)
	}
	if len(b) < 11 || !bytes.HasPrefix(b, []byte("TGWV1")) {
		return errors.New("reading word vectors: bad header")
	}
	n := int(binary.LittleEndian.Uint32(b[5:]))
	dims := int(binary.LittleEndian.Uint16(b[9:]))
	if n >= 0xFFFF {
		return fmt.Errorf("reading word vectors: %d words do not fit uint16 rows", n)
	}
	off := 11
	for range n {
		off += 1 + int(b[off])
	}
	raw := b[off:]
	if len(raw) != n*dims {
		return fmt.Errorf("reading word vectors: %d vector bytes, want %d", len(raw), n*dims)
	}
	// Unit float vectors from the int8 rows, so the cosine is a dot.
	vecs := make([]float32, n*dims)
	for r := range n {
		var s float64
		for i := range dims {
			x := float64(int8(raw[r*dims+i]))
			s += x * x
		}
		if s == 0 {
			continue
		}
		inv := 1 / math.Sqrt(s)
		for i := range dims {
			vecs[r*dims+i] = float32(float64(int8(raw[r*dims+i])) * inv)
		}
	}
	type nb struct {
		row int
		sim float32
	}
	table := make([][nbK]nb, n)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := nbMinRow + w; r < n; r += workers {
				q := vecs[r*dims : (r+1)*dims]
				var best []nb
				for o := nbMinRow / 2; o < n; o++ {
					if o == r {
						continue
					}
					v := vecs[o*dims : (o+1)*dims]
					var s float32
					for i, x := range q {
						s += x * v[i]
					}
					if s >= nbMinSim {
						best = append(best, nb{o, s})
					}
				}
				sort.Slice(best, func(i, j int) bool {
					if best[i].sim != best[j].sim {
						return best[i].sim > best[j].sim
					}
					return best[i].row < best[j].row
				})
				for k := range nbK {
					table[r][k] = nb{row: 0xFFFF}
					if k < len(best) {
						table[r][k] = best[k]
					}
				}
			}
		}()
	}
	wg.Wait()
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("writing neighbours: %w", err)
	}
	o := bufio.NewWriter(f)
	o.WriteString("TGNB1")
	binary.Write(o, binary.LittleEndian, uint32(n))
	o.WriteByte(nbK)
	for r := range n {
		for k := range nbK {
			e := table[r][k]
			if r < nbMinRow {
				e = nb{row: 0xFFFF}
			}
			binary.Write(o, binary.LittleEndian, uint16(e.row))
			o.WriteByte(byte(math.Round(float64(e.sim) * 255)))
		}
	}
	if err := o.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("writing neighbours: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing neighbours: %w", err)
	}
	return nil
}
