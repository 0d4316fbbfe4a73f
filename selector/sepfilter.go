package selector

// sepFilter is a bleve char filter that turns each run of separator bytes
// into one space: what bleve's regexp char filter does with a pattern of
// the form [seps]+, which costs a quarter of analysing a request. The
// separators are ASCII, which no byte of a multi-byte UTF-8 sequence is,
// so working byte by byte changes nothing else.
type sepFilter struct{ sep [256]bool }

func newSepFilter(seps string) *sepFilter {
	f := &sepFilter{}
	for i := 0; i < len(seps); i++ {
		f.sep[seps[i]] = true
	}
	return f
}

// Filter returns in itself when it holds no separator, else a new slice.
func (f *sepFilter) Filter(in []byte) []byte {
	first := -1
	for i, b := range in {
		if f.sep[b] {
			first = i
			break
		}
	}
	if first < 0 {
		return in
	}
	out := append(make([]byte, 0, len(in)), in[:first]...)
	inRun := false
	for _, b := range in[first:] {
		if f.sep[b] {
			if !inRun {
				out = append(out, ' ')
			}
			inRun = true
			continue
		}
		inRun = false
		out = append(out, b)
	}
	return out
}
