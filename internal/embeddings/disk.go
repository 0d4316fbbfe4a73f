package embeddings

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// diskBound keeps the vector files of a cache dir under max bytes. bytes
// is an estimate: what a sweep last measured plus what this process wrote
// since (another gateway sharing the directory is seen at the next sweep).
type diskBound struct {
	max      int64
	bytes    atomic.Int64
	sweeping atomic.Bool    // one sweep at a time: a write over the bound while one runs starts none
	sweeps   sync.WaitGroup // the sweep running, for tests
}

// diskMagic starts every cache file; the vector's length follows it, so a
// truncated or torn file is told from a vector of another length.
const diskMagic = "TGE1"

const diskHeader = len(diskMagic) + 4

// readDisk and writeDisk keep one file per vector: diskMagic, the length
// as a little-endian uint32, then the little-endian float32 components.
// Disk errors only cost a recomputation, so they are not reported. A file
// that does not hold a usable vector of the endpoint's length is a miss,
// and is removed so that the recomputed vector replaces it.
func (e *OpenAI) readDisk(k string) ([]float32, bool) {
	if e.cacheDir == "" {
		return nil, false
	}
	path := filepath.Join(e.cacheDir, k+".f32")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	v, ok := decodeVector(b)
	if !ok || e.checkDims(v) != nil {
		_ = os.Remove(path)
		return nil, false
	}
	// Sweeps remove the least recently modified files, so a vector still
	// in use must look recent. A disk hit happens once per process and key
	// (the memory cache answers after it), so the syscall is rare.
	_ = os.Chtimes(path, time.Time{}, time.Now())
	return v, true
}

// decodeVector parses a cache file, reporting whether it is whole.
func decodeVector(b []byte) ([]float32, bool) {
	if len(b) < diskHeader || string(b[:len(diskMagic)]) != diskMagic {
		return nil, false
	}
	n := int(binary.LittleEndian.Uint32(b[len(diskMagic):]))
	b = b[diskHeader:]
	if n == 0 || len(b) != 4*n {
		return nil, false
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[i*4:]))
	}
	return v, true
}

func (e *OpenAI) writeDisk(k string, v []float32) {
	if e.cacheDir == "" {
		return
	}
	b := make([]byte, diskHeader+4*len(v))
	copy(b, diskMagic)
	binary.LittleEndian.PutUint32(b[len(diskMagic):], uint32(len(v)))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[diskHeader+i*4:], math.Float32bits(x))
	}
	// A temporary file of its own, then a rename: gateways sharing the
	// directory (or one writing a key twice) never read a torn file.
	f, err := os.CreateTemp(e.cacheDir, k+".*.tmp") // mode 0600
	if err != nil {
		return
	}
	_, werr := f.Write(b)
	if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(f.Name(), filepath.Join(e.cacheDir, k+".f32")) != nil {
		_ = os.Remove(f.Name())
		return
	}
	// A rewritten key is counted twice; the next sweep measures it right.
	e.disk.bytes.Add(int64(len(b)))
	e.startSweep(false)
}

// startSweep starts a sweep of the cache dir in the background when the
// estimate is over the bound (or always, with force) and none is running.
func (e *OpenAI) startSweep(force bool) {
	if !force && e.disk.bytes.Load() <= e.disk.max {
		return
	}
	if !e.disk.sweeping.CompareAndSwap(false, true) {
		return
	}
	e.disk.sweeps.Add(1)
	go func() {
		defer e.disk.sweeps.Done()
		for {
			ok := e.sweepDisk()
			e.disk.sweeping.Store(false)
			// Writes that found this sweep running started none; one that
			// could not get under the bound is not retried until the
			// next write.
			if !ok || e.disk.bytes.Load() <= e.disk.max || !e.disk.sweeping.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// sweepDisk measures the vector files of the cache dir and, when they
// exceed the bound, removes the least recently modified until they fill
// at most 90 % of it, so that the next sweep is some writes away. It
// reports whether the files are within the bound afterwards.
func (e *OpenAI) sweepDisk() bool {
	counted := e.disk.bytes.Load()
	entries, err := os.ReadDir(e.cacheDir)
	if err != nil {
		return false
	}
	type file struct {
		name string
		size int64
		mod  time.Time
	}
	var files []file
	var total int64
	for _, d := range entries {
		if !d.Type().IsRegular() || !strings.HasSuffix(d.Name(), ".f32") {
			continue
		}
		info, err := d.Info()
		if err != nil {
			continue // removed meanwhile, by another gateway's sweep
		}
		files = append(files, file{d.Name(), info.Size(), info.ModTime()})
		total += info.Size()
	}
	if total > e.disk.max {
		slices.SortFunc(files, func(a, b file) int { return cmp.Or(a.mod.Compare(b.mod), strings.Compare(a.name, b.name)) })
		target := e.disk.max / 10 * 9
		for _, f := range files {
			if total <= target {
				break
			}
			if err := os.Remove(filepath.Join(e.cacheDir, f.name)); err == nil || os.IsNotExist(err) {
				total -= f.size
			}
		}
	}
	// Replace what was counted before the listing with what it found;
	// writes since then stay counted.
	e.disk.bytes.Add(total - counted)
	return total <= e.disk.max
}

// prepareCacheDir creates dir, readable by its owner only (vectors of the
// catalogs' tool texts), and checks that files can be written in it.
func prepareCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating embeddings cache dir: %w", err)
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("writing in embeddings cache dir: %w", err)
	}
	_ = f.Close()
	_ = os.Remove(f.Name())
	return nil
}
