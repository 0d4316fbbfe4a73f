package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/selector"
)

func TestTheInflightLimitComesFromTheFlagOrTheContainersMemory(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	small := file("small", "536870912\n") // 512 MB
	large := file("large", "68719476736\n")
	unlimited := file("unlimited", "max\n")
	for _, tc := range []struct {
		name  string
		flag  string
		files []string
		want  int64
		usage bool
	}{
		{"the flag sets it in megabytes", "256", []string{small}, 256 << 20, false},
		{"a flag of 0 lifts the bound", "0", nil, -1, false},
		{"a negative flag is a usage error", "-5", nil, 0, true},
		{"a flag that is not a number is a usage error", "1g", nil, 0, true},
		{"a small container gets a quarter of its memory", "", []string{small}, 128 << 20, false},
		{"a large container gets the default", "", []string{large}, proxy.DefaultMaxInflightBytes, false},
		{"a container without a limit gets the default", "", []string{unlimited}, proxy.DefaultMaxInflightBytes, false},
		{"no cgroup files means the default", "", []string{filepath.Join(dir, "absent")}, proxy.DefaultMaxInflightBytes, false},
		{"the first file with a limit counts", "", []string{unlimited, small}, 128 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := inflightLimit(tc.flag, tc.files)
			if tc.usage {
				if !errors.Is(err, errUsage) {
					t.Errorf("err = %v, want a usage error", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("inflightLimit = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestTheCompileLimitComesFromTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flag  string
		want  int64
		usage bool
	}{
		{"the flag sets it in megabytes", "16", 16 << 20, false},
		{"a flag of 0 lifts the bound", "0", -1, false},
		{"a negative flag is a usage error", "-1", 0, true},
		{"a flag that is not a number is a usage error", "8mb", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := compileLimit(tc.flag)
			if tc.usage {
				if !errors.Is(err, errUsage) {
					t.Errorf("err = %v, want a usage error", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("compileLimit = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestTheCompilesLimitComesFromTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flag  string
		want  int
		usage bool
	}{
		{"the flag sets it in compiles", "3", 3, false},
		{"a flag of 0 lifts the bound", "0", -1, false},
		{"a negative flag is a usage error", "-1", 0, true},
		{"a flag that is not a whole number is a usage error", "1.5", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := compilesLimit(tc.flag)
			if tc.usage {
				if !errors.Is(err, errUsage) {
					t.Errorf("err = %v, want a usage error", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("compilesLimit = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	t.Run("without the flag serve takes the default", func(t *testing.T) {
		c, err := parseServe(nil, io.Discard)
		if err != nil || c.maxCompiles != selector.DefaultCompiles() {
			t.Errorf("maxCompiles = %d, %v; want %d", c.maxCompiles, err, selector.DefaultCompiles())
		}
	})
	t.Run("the environment sets it when the flag is absent", func(t *testing.T) {
		t.Setenv("GATEWAY_MAX_COMPILES", "5")
		c, err := parseServe(nil, io.Discard)
		if err != nil || c.maxCompiles != 5 {
			t.Errorf("maxCompiles = %d, %v; want 5", c.maxCompiles, err)
		}
	})
}

func TestTheCatalogCacheLimitComesFromTheFlagOrTheContainersMemory(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("1073741824\n"), 0o644); err != nil { // 1 GB
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		flag  string
		files []string
		want  int64
		from  string
		usage bool
	}{
		{"the flag sets it in megabytes", "2048", []string{small}, 2048 << 20, "flag", false},
		{"a flag of 0 lifts the bound", "0", nil, -1, "flag", false},
		{"a flag that is not a number is a usage error", "1g", nil, 0, "", true},
		{"a small container keeps a quarter of its memory in catalogs", "", []string{small}, 256 << 20, "a quarter of the container's memory limit", false},
		{"no container limit means the default", "", []string{filepath.Join(dir, "absent")}, selector.DefaultCacheBytes, "default", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, from, err := catalogCacheLimit(tc.flag, tc.files)
			if tc.usage {
				if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--catalog-cache-mb") {
					t.Errorf("err = %v, want a usage error naming --catalog-cache-mb", err)
				}
				return
			}
			if err != nil || got != tc.want || from != tc.from {
				t.Errorf("catalogCacheLimit = %d, %q, %v; want %d, %q", got, from, err, tc.want, tc.from)
			}
		})
	}
}

func TestTheRuntimesMemoryLimitFollowsTheContainers(t *testing.T) {
	dir := t.TempDir()
	limited := filepath.Join(dir, "memory.max")
	if err := os.WriteFile(limited, []byte("1073741824\n"), 0o644); err != nil { // 1 GB
		t.Fatal(err)
	}
	unlimited := filepath.Join(dir, "max")
	if err := os.WriteFile(unlimited, []byte("max\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		env   string
		files []string
		want  int64
	}{
		{"a container's limit sets nine tenths of it", "", []string{limited}, 1073741824 / 10 * 9},
		{"GOMEMLIMIT keeps what it says", "800MiB", []string{limited}, 0},
		{"a container without a limit leaves the runtime's default", "", []string{unlimited}, 0},
		{"no cgroup file leaves the runtime's default", "", []string{filepath.Join(dir, "absent")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := softMemoryLimit(tc.env, tc.files); got != tc.want {
				t.Errorf("softMemoryLimit = %d, want %d", got, tc.want)
			}
		})
	}
}
