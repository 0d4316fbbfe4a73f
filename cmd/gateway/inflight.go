package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/selector"
)

// cgroupMemoryFiles hold a container's memory limit: cgroup v2's, then
// v1's.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// inflightLimit returns the in-flight bound for the --max-inflight-mb
// flag's text, in bytes (below 0: none), and where it came from. Empty
// text means the default: proxy.DefaultMaxInflightBytes, or a quarter of
// the container's memory limit when that is lower, so a 512 MB container
// is not told it may hold a gigabyte of request bodies.
func inflightLimit(text string, files []string) (int64, string, error) {
	return memoryLimit("max-inflight-mb", text, proxy.DefaultMaxInflightBytes, files)
}

// catalogCacheLimit returns the catalog cache's byte bound for the
// --catalog-cache-mb flag's text (below 0: none), and where it came from:
// as inflightLimit, from selector.DefaultCacheBytes.
func catalogCacheLimit(text string, files []string) (int64, string, error) {
	return memoryLimit("catalog-cache-mb", text, selector.DefaultCacheBytes, files)
}

// memoryLimit returns a bound in bytes that the flag named flag sets in
// megabytes (text; 0: no bound, returned as -1), or else def, or a
// quarter of the container's memory limit, read from the first of files
// that holds one, when that is lower; and where it came from.
func memoryLimit(flag, text string, def int64, files []string) (int64, string, error) {
	if text != "" {
		mb, err := strconv.ParseInt(text, 10, 64)
		if err != nil || mb < 0 || mb > 1<<30 {
			return 0, "", fmt.Errorf("%w: --%s %q must be a whole number of megabytes, 0 for no bound", errUsage, flag, text)
		}
		if mb == 0 {
			return -1, "flag", nil
		}
		return mb << 20, "flag", nil
	}
	if limit := containerMemory(files); limit > 0 && limit/4 < def {
		return limit / 4, "a quarter of the container's memory limit", nil
	}
	return def, "default", nil
}

// containerMemory returns the container's memory limit in bytes, read
// from the first of files that holds one, or 0 when none does ("max":
// no limit).
func containerMemory(files []string) int64 {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		limit, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || limit <= 0 {
			continue
		}
		return limit
	}
	return 0
}

// softMemoryLimit returns the Go runtime's soft memory limit for a
// process in a container (runtime/debug.SetMemoryLimit), or 0 to leave
// the runtime's default: nine tenths of the container's limit, unless
// GOMEMLIMIT (env, the runtime's own setting) says otherwise. Go lets
// its heap double between collections, so a gateway whose caches hold a
// third of a container's memory could otherwise be killed for memory it
// would have collected; under the limit it collects sooner instead.
func softMemoryLimit(env string, files []string) int64 {
	if env != "" {
		return 0
	}
	return containerMemory(files) / 10 * 9
}

// compileLimit returns the compile bound for the --max-compile-mb flag's
// text, in bytes of tool text (below 0: none).
func compileLimit(text string) (int64, error) {
	mb, err := strconv.ParseInt(text, 10, 64)
	if err != nil || mb < 0 || mb > 1<<20 {
		return 0, fmt.Errorf("%w: --max-compile-mb %q must be a whole number of megabytes, 0 for no bound", errUsage, text)
	}
	if mb == 0 {
		return -1, nil
	}
	return mb << 20, nil
}

// compilesLimit returns the bound for the --max-compiles flag's text, in
// compiles running at once (below 0: none).
func compilesLimit(text string) (int, error) {
	n, err := strconv.Atoi(text)
	if err != nil || n < 0 || n > 1<<16 {
		return 0, fmt.Errorf("%w: --max-compiles %q must be a whole number of compiles, 0 for no bound", errUsage, text)
	}
	if n == 0 {
		return -1, nil
	}
	return n, nil
}
