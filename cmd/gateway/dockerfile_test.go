package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy"
)

// dockerStopGrace is how long a plain `docker stop` waits after SIGTERM
// before it kills the container.
const dockerStopGrace = 10 * time.Second

// imageEnv returns the variables the Dockerfile's ENV instructions set.
func imageEnv(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	text := strings.ReplaceAll(string(b), "\\\n", " ") // continuation lines
	for line := range strings.Lines(text) {
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != "ENV" {
			continue
		}
		for _, kv := range fields[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("Dockerfile: ENV %q is not KEY=VALUE", kv)
			}
			env[k] = v
		}
	}
	return env
}

// TestTheImageDrainsWithinDockerStopsGrace: the image's drain must end
// within a plain `docker stop`'s 10 s before the kill; at serve's 25 s
// default the kill would cut the gateway off mid-drain, ending streams
// without their error event and losing the decision log's queue.
func TestTheImageDrainsWithinDockerStopsGrace(t *testing.T) {
	env := imageEnv(t)
	if env["GATEWAY_DRAIN_TIMEOUT"] == "" {
		t.Error("the Dockerfile does not set GATEWAY_DRAIN_TIMEOUT: the image drains for serve's default")
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	c, err := parseServe(nil, io.Discard)
	if err != nil {
		t.Fatalf("serve refuses the image's environment: %v", err)
	}
	if worst := c.drainDelay + c.drainTimeout + proxy.CutGrace; worst >= dockerStopGrace {
		t.Errorf("the image's drain takes up to %s (delay %s, timeout %s, then %s for the requests cut), not under docker stop's %s",
			worst, c.drainDelay, c.drainTimeout, proxy.CutGrace, dockerStopGrace)
	}
}
