package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// maxEventSize bounds one SSE event, so a hostile or broken upstream cannot
// grow the gateway's memory without limit. It is a whole answer's bound
// (maxResponseBody): a Responses stream's response.completed repeats the
// whole output, generated images' base64 included, so one event may be as
// large as the answer.
const maxEventSize = maxResponseBody

// errEventTooLarge is returned for an event over maxEventSize.
var errEventTooLarge = errors.New("stream event too large")

// sseReader reads the data of server-sent events, and the comments between
// them (a provider's keep-alives). Event names and ids are skipped: every
// API the gateway speaks repeats the name in the data.
type sseReader struct {
	br   *bufio.Reader
	data []byte
}

// sseBufSize is the read buffer of one upstream stream; longer lines are
// assembled piecewise.
const sseBufSize = 64 << 10

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, sseBufSize)}
}

// sseReaders lends SSE readers: each streamed round needs one, and its
// 64 KB buffer was the largest allocation of a streamed turn.
type sseReaders struct{ p sync.Pool }

// get returns a reader of r.
func (rs *sseReaders) get(r io.Reader) *sseReader {
	if s, ok := rs.p.Get().(*sseReader); ok {
		s.br.Reset(r)
		return s
	}
	return newSSEReader(r)
}

// put gives s back once its stream is done. Nothing may hold what Next
// returned (the relay clones what outlives an event). A large event's
// buffer is dropped rather than kept.
func (rs *sseReaders) put(s *sseReader) {
	s.br.Reset(nil)
	if cap(s.data) > sseBufSize {
		s.data = nil
	}
	s.data = s.data[:0]
	rs.p.Put(s)
}

// Next returns the data of the next event (multi-line data joined with
// "\n"), or a comment line that comes before an event's data (comment
// true: the line as it came, its colon first, for the relay to pass on),
// and io.EOF once the stream has ended. A comment inside an event's data
// is skipped: the stream is not silent, its event is on the way. An event
// the stream ends inside (no blank line after it, or no newline) is
// returned as it stands: servers that end with "data: [DONE]\n" exist,
// and the openai SDKs accept them; a chunk cut short fails to parse as
// JSON instead. The slice is valid until the next call.
func (s *sseReader) Next() (data []byte, comment bool, err error) {
	s.data = s.data[:0]
	have := false
	for {
		line, err := s.line()
		if err != nil {
			if errors.Is(err, io.EOF) && have {
				return s.data, false, nil
			}
			return nil, false, err
		}
		if len(line) == 0 {
			if have {
				return s.data, false, nil
			}
			continue
		}
		if line[0] == ':' {
			if have {
				continue
			}
			return line, true, nil
		}
		field, value, _ := bytes.Cut(line, []byte{':'})
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		if string(field) != "data" {
			continue
		}
		if have {
			s.data = append(s.data, '\n')
		}
		if len(s.data)+len(value) > maxEventSize {
			return nil, false, fmt.Errorf("%w: over %d bytes", errEventTooLarge, maxEventSize)
		}
		s.data = append(s.data, value...)
		have = true
	}
}

// line returns one line without its terminator (\n or \r\n); the
// stream's last line may have none.
func (s *sseReader) line() ([]byte, error) {
	var long []byte
	for {
		frag, err := s.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(long)+len(frag) > maxEventSize {
				return nil, fmt.Errorf("%w: line over %d bytes", errEventTooLarge, maxEventSize)
			}
			long = append(long, frag...)
			continue
		}
		if err != nil && (err != io.EOF || len(frag)+len(long) == 0) {
			return nil, err
		}
		if long != nil {
			frag = append(long, frag...)
		}
		frag = bytes.TrimRight(frag, "\r\n")
		return frag, nil
	}
}

// appendFrame appends one SSE event: its name line, if any, and its data.
// Data the reader joined from several lines (a server's pretty-printed
// JSON) goes out in as many "data:" lines, which the client's parser
// joins back: after one "data: " its later lines would be lines of no
// field, which a parser drops.
func appendFrame(b []byte, name string, data []byte) []byte {
	if name != "" {
		b = append(append(append(b, "event: "...), name...), '\n')
	}
	for {
		line, rest, more := bytes.Cut(data, []byte{'\n'})
		b = append(append(append(b, "data: "...), line...), '\n')
		if !more {
			return append(b, '\n')
		}
		data = rest
	}
}
