package selector

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

var _ Embedder = (*OpenAIEmbedder)(nil)

// OpenAIEmbedder calls an OpenAI-compatible POST {BaseURL}/embeddings. It
// caches vectors in memory (LRU) and, when CacheDir is set, on disk, keyed
// by the hash of model and text, so a restart does not re-embed a catalog.
// It is safe for concurrent use. It does not retry: the selector treats any
// error as "lexical only".
type OpenAIEmbedder struct {
	baseURL  string
	model    string
	key      string
	client   *http.Client
	cacheDir string
	mem      *lru.Cache[string, []float32]
	batch    int
}

// OpenAIEmbedderOptions configures NewOpenAIEmbedder.
type OpenAIEmbedderOptions struct {
	BaseURL  string       // e.g. https://api.openai.com/v1 (required)
	Model    string       // e.g. text-embedding-3-small (required)
	APIKey   string       // sent as a Bearer token when not empty
	Client   *http.Client // nil means a client with a 30 s timeout
	CacheDir string       // "" disables the on-disk cache
	MemSize  int          // in-memory cached vectors; <= 0 means 20,000
	Batch    int          // texts per request; <= 0 means 128
}

// NewOpenAIEmbedder returns an embedder for opts.
func NewOpenAIEmbedder(opts OpenAIEmbedderOptions) (*OpenAIEmbedder, error) {
	if opts.BaseURL == "" || opts.Model == "" {
		return nil, fmt.Errorf("openai embedder: base URL and model are required")
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 30 * time.Second}
	}
	if opts.MemSize <= 0 {
		opts.MemSize = 20000
	}
	if opts.Batch <= 0 {
		opts.Batch = 128
	}
	mem, err := lru.New[string, []float32](opts.MemSize)
	if err != nil {
		return nil, fmt.Errorf("openai embedder: %w", err)
	}
	if opts.CacheDir != "" {
		if err := os.MkdirAll(opts.CacheDir, 0o755); err != nil {
			return nil, fmt.Errorf("openai embedder: creating cache dir: %w", err)
		}
	}
	return &OpenAIEmbedder{
		baseURL: strings.TrimRight(opts.BaseURL, "/"), model: opts.Model, key: opts.APIKey,
		client: opts.Client, cacheDir: opts.CacheDir, mem: mem, batch: opts.Batch,
	}, nil
}

// Model returns the embedding model name.
func (e *OpenAIEmbedder) Model() string { return e.model }

// Embed returns one vector per text, from the caches where it can.
func (e *OpenAIEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var missIdx []int
	for i, t := range texts {
		k := e.key4(t)
		if v, ok := e.mem.Get(k); ok {
			out[i] = v
			continue
		}
		if v, ok := e.readDisk(k); ok {
			e.mem.Add(k, v)
			out[i] = v
			continue
		}
		missIdx = append(missIdx, i)
	}
	for start := 0; start < len(missIdx); start += e.batch {
		idx := missIdx[start:min(start+e.batch, len(missIdx))]
		batch := make([]string, len(idx))
		for j, i := range idx {
			batch[j] = texts[i]
		}
		vecs, err := e.call(ctx, batch)
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			out[i] = vecs[j]
			k := e.key4(texts[i])
			e.mem.Add(k, vecs[j])
			e.writeDisk(k, vecs[j])
		}
	}
	return out, nil
}

func (e *OpenAIEmbedder) key4(text string) string {
	h := sha256.Sum256([]byte(e.model + "\x00" + text))
	return hex.EncodeToString(h[:16])
}

func (e *OpenAIEmbedder) call(ctx context.Context, texts []string) ([][]float32, error) {
	body, err := json.Marshal(map[string]any{"model": e.model, "input": texts})
	if err != nil {
		return nil, fmt.Errorf("encoding embeddings request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.baseURL+"/embeddings", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building embeddings request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.key != "" {
		req.Header.Set("Authorization", "Bearer "+e.key)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("calling embeddings: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("reading embeddings response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("calling embeddings: status %d: %.200s", resp.StatusCode, data)
	}
	var parsed struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &parsed); err != nil {
		return nil, fmt.Errorf("decoding embeddings response: %w", err)
	}
	out := make([][]float32, len(texts))
	for _, d := range parsed.Data {
		if d.Index < 0 || d.Index >= len(out) {
			return nil, fmt.Errorf("decoding embeddings response: index %d out of range", d.Index)
		}
		out[d.Index] = d.Embedding
	}
	for i, v := range out {
		if len(v) == 0 {
			return nil, fmt.Errorf("decoding embeddings response: no vector for input %d", i)
		}
	}
	return out, nil
}

// readDisk and writeDisk keep one little-endian float32 file per vector.
// Disk errors only cost a recomputation, so they are not reported.
func (e *OpenAIEmbedder) readDisk(k string) ([]float32, bool) {
	if e.cacheDir == "" {
		return nil, false
	}
	b, err := os.ReadFile(filepath.Join(e.cacheDir, k+".f32"))
	if err != nil || len(b)%4 != 0 || len(b) == 0 {
		return nil, false
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[i*4:]))
	}
	return v, true
}

func (e *OpenAIEmbedder) writeDisk(k string, v []float32) {
	if e.cacheDir == "" {
		return
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[i*4:], math.Float32bits(x))
	}
	tmp := filepath.Join(e.cacheDir, k+".tmp")
	if os.WriteFile(tmp, b, 0o644) == nil {
		_ = os.Rename(tmp, filepath.Join(e.cacheDir, k+".f32"))
	}
}
