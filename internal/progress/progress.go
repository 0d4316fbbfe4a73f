// Package progress draws a one-line progress bar for the demo and bench
// commands. It owns terminal drawing only. It must not decide whether to
// draw (callers check that the output is a terminal, so logs and pipes
// get no control characters) nor know what the work being counted is.
package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

const width = 30

// Bar returns a func that draws "label [####....] done/total" on w,
// rewriting the line with \r, and clears the line when done reaches total.
// It redraws only when the bar changes and is safe for concurrent use.
func Bar(w io.Writer, label string) func(done, total int) {
	var mu sync.Mutex
	last := -1
	return func(done, total int) {
		if total <= 0 {
			return
		}
		done = min(done, total)
		n := done * width / total
		mu.Lock()
		defer mu.Unlock()
		if n == last && done < total {
			return
		}
		last = n
		fmt.Fprintf(w, "\r%s [%s%s] %d/%d", label, strings.Repeat("#", n), strings.Repeat(".", width-n), done, total)
		if done >= total {
			fmt.Fprintf(w, "\r%s\r", strings.Repeat(" ", len(label)+width+24))
		}
	}
}
