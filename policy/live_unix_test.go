//go:build unix

package policy

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// reloadWithin runs l.Reload and fails the test if it has not returned
// within a generous deadline: a reload that blocks on an open must not
// hang the test too.
func reloadWithin(t *testing.T, l *Live) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- l.Reload() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("Reload blocked for 5s")
		return nil
	}
}

func TestAReloadRefusesWhatIsNotARegularFile(t *testing.T) {
	const good = "deny: [a_*]\ncategories:\n  code: {hints: hints/code.md}\n"
	for _, tc := range []struct {
		name    string
		replace string // the file replaced by something else
		make    func(path string) error
		want    string
	}{
		{"a FIFO at the config path is refused without blocking", "tools.yaml",
			func(p string) error { return syscall.Mkfifo(p, 0o600) }, "named pipe"},
		{"a FIFO as a hints file is refused without blocking", "hints/code.md",
			func(p string) error { return syscall.Mkfifo(p, 0o600) }, "not a regular file"},
		{"a directory at the config path is refused", "tools.yaml",
			func(p string) error { return os.Mkdir(p, 0o755) }, "directory"},
		{"a symlink to a FIFO at the config path is refused", "tools.yaml",
			func(p string) error {
				fifo := filepath.Join(filepath.Dir(p), "pipe")
				if err := syscall.Mkfifo(fifo, 0o600); err != nil {
					return err
				}
				return os.Symlink("pipe", p)
			}, "named pipe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"tools.yaml": good, "hints/code.md": "guidance"})
			path := filepath.Join(dir, "tools.yaml")
			live, err := NewLive(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			good := live.Current()
			target := filepath.Join(dir, tc.replace)
			if err := os.Remove(target); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(target); err != nil {
				t.Fatal(err)
			}
			err = reloadWithin(t, live)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.replace) {
				t.Errorf("got %v, want a problem at %s saying %q", err, tc.replace, tc.want)
			}
			if live.Current() != good {
				t.Error("the refused file replaced the policy")
			}
			// Once a good file is back, a reload applies it: nothing is
			// left blocked on the refused one.
			if err := os.RemoveAll(target); err != nil {
				t.Fatal(err)
			}
			restored := "guidance"
			if tc.replace == "tools.yaml" {
				restored = "deny: [b_*]\ncategories:\n  code: {hints: hints/code.md}\n"
			}
			writeFile(t, target, restored)
			if err := reloadWithin(t, live); err != nil {
				t.Fatalf("reload of the restored file: %v", err)
			}
		})
	}
}
