package rewrite

import "testing"

func TestRetrievedResponseShowsTheClientsIDAndCalls(t *testing.T) {
	const round = `{"id":"resp_last","output":[{"type":"function_call","call_id":"c_search","name":"tool_search"},{"type":"message","call_id":"c_search"},{"type":"function_call","call_id":"c_mail","name":"mail_send"}],"usage":{}}`
	tests := []struct {
		name    string
		gateway func(string) bool
		want    string
	}{
		{"no calls of the gateway's", nil, `{"id":"resp_first","output":[{"type":"function_call","call_id":"c_search","name":"tool_search"},{"type":"message","call_id":"c_search"},{"type":"function_call","call_id":"c_mail","name":"mail_send"}],"usage":{}}`},
		{
			"the gateway's call goes, an item of another type with its call_id stays",
			func(id string) bool { return id == "c_search" },
			`{"id":"resp_first","output":[{"type":"message","call_id":"c_search"},{"type":"function_call","call_id":"c_mail","name":"mail_send"}],"usage":{}}`,
		},
		{"every call", func(string) bool { return true }, `{"id":"resp_first","output":[{"type":"message","call_id":"c_search"}],"usage":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RetrievedResponse([]byte(round), "resp_first", tt.gateway)
			if err != nil || string(got) != tt.want {
				t.Errorf("RetrievedResponse = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}
