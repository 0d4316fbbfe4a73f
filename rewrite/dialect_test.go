package rewrite

import "testing"

func TestDialectNamesAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range []Named{Chat{}, Responses{}, Messages{}} {
		if n := d.Name(); n == "" || seen[n] {
			t.Errorf("%T is named %q, empty or another dialect's", d, n)
		}
		seen[d.Name()] = true
	}
}

func TestOnlyTheResponsesStreamEchoesTools(t *testing.T) {
	for _, d := range []Dialect{Chat{}, Responses{}, Messages{}} {
		_, echoes := d.(ToolsEchoer)
		if _, responses := d.(Responses); echoes != responses {
			t.Errorf("%T: ToolsEchoer %v", d, echoes)
		}
	}
}
