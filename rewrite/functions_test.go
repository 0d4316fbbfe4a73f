package rewrite

import (
	"strings"
	"testing"
)

func TestKeepFunctionsCutsOnlyWhatItDrops(t *testing.T) {
	noMail := func(name string) bool { return !strings.HasPrefix(name, "mail_") }
	tests := []struct {
		name, body, want string
	}{
		{"a body whose functions are all kept is returned as it is",
			`{"functions": [ {"name":"a"} ],"function_call":"auto"}`, `{"functions": [ {"name":"a"} ],"function_call":"auto"}`},
		{"a dropped function goes and the kept ones stay as written",
			`{"functions":[{"name":"mail_send"}, {"name": "a", "x":1}],"function_call":{"name":"a"}}`, `{"functions":[{"name": "a", "x":1}],"function_call":{"name":"a"}}`},
		{"a body without a kept function goes without functions and function_call",
			`{"model":"m","functions":[{"name":"mail_send"}],"function_call":"auto"}`, `{"model":"m"}`},
		{"a body without functions is returned as it is", `{"model":"m"}`, `{"model":"m"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := KeepFunctions([]byte(tt.body), noMail)
			if err != nil || string(got) != tt.want {
				t.Errorf("KeepFunctions(%s) = %s, %v; want %s", tt.body, got, err, tt.want)
			}
		})
	}
}
