package selector

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// diskMagic starts every cache file; the vector's length follows it, so a
// truncated or torn file is told from a vector of another length.
const diskMagic = "TGE1"

const diskHeader = len(diskMagic) + 4

// readDisk and writeDisk keep one file per vector: diskMagic, the length
// as a little-endian uint32, then the little-endian float32 components.
// Disk errors only cost a recomputation, so they are not reported. A file
// that does not hold a usable vector of the endpoint's length is a miss,
// and is removed so that the recomputed vector replaces it.
func (e *OpenAIEmbedder) readDisk(k string) ([]float32, bool) {
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

func (e *OpenAIEmbedder) writeDisk(k string, v []float32) {
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
	}
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
