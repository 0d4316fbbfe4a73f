package proxy

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/toolgate/toolgate/rewrite"
)

// Request bodies that a client compressed (an SDK's or a corporate proxy's
// gzip) are decoded on the chat route: the gateway has to read the JSON,
// and the upstream gets what the gateway built from it, unencoded.

// contentCodings returns the codings of a request's Content-Encoding in the
// order they were applied, without identity. One the gateway cannot decode
// is an ErrUnsupportedEncoding.
func contentCodings(h http.Header) ([]string, error) {
	var codings []string
	for _, v := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			switch c = strings.ToLower(strings.TrimSpace(c)); c {
			case "", "identity":
			case "gzip", "x-gzip", "deflate":
				codings = append(codings, c)
			default:
				return nil, fmt.Errorf("%w %q: the gateway reads request bodies encoded with gzip or deflate, or not encoded", ErrUnsupportedEncoding, c)
			}
		}
	}
	return codings, nil
}

// readEncoded reads a body encoded with codings, at most limit bytes of it
// as sent and at most limit bytes once decoded: a body that decodes past
// the limit is refused as one sent that big is, so a few kilobytes of
// compressed zeros cannot make the gateway hold gigabytes.
func readEncoded(w http.ResponseWriter, r *http.Request, codings []string, limit int64, hold *heldReader) (*bodyBuf, error) {
	var src io.Reader = http.MaxBytesReader(w, r.Body, limit)
	for i := len(codings) - 1; i >= 0; i-- {
		var err error
		if src, err = decoder(src, codings[i]); err != nil {
			return nil, bodyErr(fmt.Errorf("reading the %s request body: %w", codings[i], err), limit)
		}
	}
	hold.r = io.LimitReader(src, limit+1)
	b, err := io.ReadAll(hold)
	if err != nil {
		return nil, bodyErr(fmt.Errorf("decoding the request body: %w", err), limit)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: the body decodes to more than %d bytes", ErrBodyTooLarge, limit)
	}
	return &bodyBuf{b: b}, nil
}

// decoder returns a reader of what src decodes to under coding.
func decoder(src io.Reader, coding string) (io.Reader, error) {
	if coding != "deflate" {
		return gzip.NewReader(src)
	}
	// HTTP's deflate is zlib's format (RFC 9110 8.4.1.2), but some clients
	// send a bare deflate stream, as browsers long accepted: a zlib header
	// (a deflate method, and a checksum of 31) tells the two apart.
	br := bufio.NewReader(src)
	h, err := br.Peek(2)
	if err == nil && h[0]&0x0f == 8 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 {
		return zlib.NewReader(br)
	}
	return flate.NewReader(br), nil
}

// bodyErr says whether err, met reading the request body, is the body over
// its limit (413) or a body the client sent broken (400).
func bodyErr(err error, limit int64) error {
	if errors.Is(err, ErrOverloaded) {
		return err
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, limit)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: it did not arrive in time (%w)", ErrBodyTimeout, err)
	}
	return fmt.Errorf("%w: %w", rewrite.ErrBadRequest, err)
}
