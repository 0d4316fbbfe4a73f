package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name       string
		args       []string
		wantErr    error
		wantStdout string
		notStdout  string // a secret stdout must not show
		wantStderr []string
	}{
		{
			name:       "a good file exits 0 with a one-line summary",
			args:       []string{"--config", write("good.yaml", "core: [github_*]\ndeny: ['*delete*']\n")},
			wantStdout: "good.yaml: ok (mode hybrid",
		},
		{
			name:       "the shipped tools.yaml is valid",
			args:       []string{"--config", filepath.Join("..", "..", "tools.yaml")},
			wantStdout: "tools.yaml: ok",
		},
		{
			name:       "a syntax error names the file and line",
			args:       []string{"--config", write("syntax.yaml", "core: [a\n")},
			wantErr:    errSilent,
			wantStderr: []string{"syntax.yaml:1:7: "},
		},
		{
			name:       "an unknown enum value names the file and line",
			args:       []string{"--config", write("enum.yaml", "tools:\n  delete_repo:\n    risk: catastrophic\n")},
			wantErr:    errSilent,
			wantStderr: []string{`enum.yaml:3:11: tools.delete_repo.risk: unknown risk "catastrophic"`},
		},
		{
			name:       "every problem is printed",
			args:       []string{"--config", write("many.yaml", "gateway:\n  mode: fast\nwat: 1\n")},
			wantErr:    errSilent,
			wantStderr: []string{"many.yaml:2:9: gateway.mode", `many.yaml:3:1: unknown key "wat"`, "2 problem(s)"},
		},
		{
			name:       "an empty file is an error naming the file",
			args:       []string{"--config", write("empty.yaml", "")},
			wantErr:    errSilent,
			wantStderr: []string{"empty.yaml: the policy file is empty; write {} for the built-in defaults"},
		},
		{
			name:       "an upstream key naming an unset environment variable names the file and line",
			args:       []string{"--config", write("unsetkey.yaml", "gateway:\n  upstream_key: $TOOLGATE_TEST_UNSET_KEY\n")},
			wantErr:    errSilent,
			wantStderr: []string{"unsetkey.yaml:2:17: gateway.upstream_key: environment variable TOOLGATE_TEST_UNSET_KEY is not set"},
		},
		{
			name:       "the summary masks the upstream URL's password",
			args:       []string{"--config", write("creds.yaml", "gateway: {upstream: 'https://user:s3cret@llm.internal/v1'}\n")},
			wantStdout: "upstream https://xxxxx@llm.internal/v1,",
			notStdout:  "s3cret",
		},
		{
			name:       "the summary masks a key given as the upstream URL's user name",
			args:       []string{"--config", write("userkey.yaml", "gateway: {upstream: 'https://sk-live-s3cret@llm.internal/v1'}\n")},
			wantStdout: "upstream https://xxxxx@llm.internal/v1,",
			notStdout:  "s3cret",
		},
		{
			name:       "the summary masks the upstream URL's query values and keeps their keys",
			args:       []string{"--config", write("querykey.yaml", "gateway: {upstream: 'https://llm.internal/v1?api-key=s3cret'}\n")},
			wantStdout: "upstream https://llm.internal/v1?api-key=xxxxx,",
			notStdout:  "s3cret",
		},
		{
			name:       "a listen port serve would refuse names the file and line",
			args:       []string{"--config", write("port.yaml", "gateway:\n  listen: 127.0.0.1:99999\n")},
			wantErr:    errSilent,
			wantStderr: []string{"port.yaml:2:11: gateway.listen: want host:port", "invalid port"},
		},
		{
			name:    "a missing file is an error",
			args:    []string{"--config", filepath.Join(dir, "absent.yaml")},
			wantErr: errSilent,
		},
		{
			name:    "stray arguments are a usage error",
			args:    []string{"--config", "a.yaml", "b.yaml"},
			wantErr: errUsage,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := runValidate(context.Background(), tt.args, &stdout, &stderr)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v (stderr %q)", err, tt.wantErr, stderr.String())
			}
			if tt.wantStdout != "" && (!strings.Contains(stdout.String(), tt.wantStdout) || strings.Count(stdout.String(), "\n") != 1) {
				t.Errorf("stdout %q, want one line containing %q", stdout.String(), tt.wantStdout)
			}
			if tt.notStdout != "" && strings.Contains(stdout.String(), tt.notStdout) {
				t.Errorf("stdout %q shows %q", stdout.String(), tt.notStdout)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q lacks %q", stderr.String(), w)
				}
			}
			if err != nil && exitCode(err, &bytes.Buffer{}) == 0 {
				t.Error("a failure maps to exit 0")
			}
		})
	}
}

// TestValidateChecksTheFileNamedOnTheCommandLine: the container image
// sets GATEWAY_CONFIG, and "gateway validate FILE" there checks FILE: the
// file named on the command line wins over the variable.
func TestValidateChecksTheFileNamedOnTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, "env.yaml")
	argFile := filepath.Join(dir, "arg.yaml")
	for path, text := range map[string]string{envFile: "core: [env_*]\n", argFile: "core: [arg_*]\n"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GATEWAY_CONFIG", envFile)
	for _, tc := range []struct {
		name    string
		args    []string
		want    string // the file the summary names
		wantErr error
	}{
		{"a file given as the argument wins over GATEWAY_CONFIG", []string{argFile}, "arg.yaml: ok", nil},
		{"a file given by --config wins over GATEWAY_CONFIG", []string{"--config", argFile}, "arg.yaml: ok", nil},
		{"GATEWAY_CONFIG is checked when the command line names no file", nil, "env.yaml: ok", nil},
		{"--config and an argument together are a usage error", []string{"--config", argFile, envFile}, "", errUsage},
		{"two arguments are a usage error", []string{argFile, envFile}, "", errUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := runValidate(context.Background(), tc.args, &stdout, &stderr)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v (stderr %q)", err, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.want) {
				t.Errorf("stdout %q, want %q in it", stdout.String(), tc.want)
			}
		})
	}
}
