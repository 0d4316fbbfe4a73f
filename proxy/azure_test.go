package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"
)

// azureResource plays an Azure OpenAI resource: it records each request's
// URI, key and body, and answers chat completions in text.
type azureResource struct {
	mu    sync.Mutex
	uris  []string
	keys  []string
	tools [][]string
}

func (a *azureResource) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.uris = append(a.uris, r.RequestURI)
	a.keys = append(a.keys, r.Header.Get("Api-Key"))
	a.tools = append(a.tools, toolNames(b))
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if strings.HasSuffix(r.URL.Path, "/embeddings") {
		_, _ = io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"e","usage":{"prompt_tokens":1,"total_tokens":1}}`)
		return
	}
	_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Done."},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`)
}

// TestAzureDeploymentRoutesAreRewritten: Azure's SDKs put the deployment
// in the path (/openai/deployments/{deployment}/chat/completions), so a
// gateway in front of a resource's /openai serves every deployment's chat
// completions through the search loop, and everything else unchanged.
func TestAzureDeploymentRoutesAreRewritten(t *testing.T) {
	res := &azureResource{}
	up := httptest.NewServer(res)
	defer up.Close()
	u, err := url.Parse(up.URL + "/openai")
	if err != nil {
		t.Fatal(err)
	}
	g := testGateway(t, http.NotFoundHandler())
	g.Upstream = u
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	client := openai.NewClient(
		azure.WithEndpoint(srv.URL, "2024-10-21"),
		azure.WithAPIKey("az-key"),
		azure.WithUnsafeAllowHTTP(),
		option.WithMaxRetries(0),
	)
	ctx := context.Background()
	for _, deployment := range []string{"gpt-4o", "gpt-4o-mini"} {
		t.Run("the chat completions of deployment "+deployment+" go through the search loop", func(t *testing.T) {
			var resp *http.Response
			done, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model:    deployment,
				Tools:    sdkTools(40),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Open an issue in the repository.")},
			}, option.WithResponseInto(&resp))
			if err != nil {
				t.Fatal(err)
			}
			if done.Choices[0].Message.Content != "Done." {
				t.Errorf("content %q, want the upstream's", done.Choices[0].Message.Content)
			}
			res.mu.Lock()
			defer res.mu.Unlock()
			last := len(res.uris) - 1
			if want := "/openai/deployments/" + deployment + "/chat/completions?api-version=2024-10-21"; res.uris[last] != want {
				t.Errorf("upstream got %s, want %s", res.uris[last], want)
			}
			if res.keys[last] != "az-key" {
				t.Errorf("upstream got api-key %q, want the client's", res.keys[last])
			}
			if tools := res.tools[last]; len(tools) == 0 || tools[0] != SearchToolName || len(tools) >= 40 {
				t.Errorf("upstream got tools %v, want tool_search and a few of the 40", tools)
			}
			if h := resp.Header.Get("X-Toolgate-Tools"); !strings.HasPrefix(h, "40->") {
				t.Errorf("X-Toolgate-Tools %q, want 40->n", h)
			}
		})
	}
	t.Run("another deployment route passes through unchanged", func(t *testing.T) {
		if _, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: "text-embedding-3-small",
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")},
		}); err != nil {
			t.Fatal(err)
		}
		res.mu.Lock()
		defer res.mu.Unlock()
		if got, want := res.uris[len(res.uris)-1], "/openai/deployments/text-embedding-3-small/embeddings?api-version=2024-10-21"; got != want {
			t.Errorf("upstream got %s, want %s", got, want)
		}
	})
}

func TestOnlyChatCompletionPathsGoThroughTheSearchLoop(t *testing.T) {
	for _, tc := range []struct {
		name, rest string
		want       bool
	}{
		{"the OpenAI path is a chat path", "/chat/completions", true},
		{"Azure's deployment path is a chat path", "/deployments/gpt-4o/chat/completions", true},
		{"a deployment path without a deployment is not", "/deployments//chat/completions", false},
		{"a deployment's legacy completions are not", "/deployments/gpt-4o/completions", false},
		{"a path below chat completions is not", "/deployments/gpt-4o/chat/completions/x", false},
		{"a deployment name with a slash is not", "/deployments/a/b/chat/completions", false},
		{"a deployment's embeddings are not", "/deployments/gpt-4o/embeddings", false},
		{"a stored completion's path is not", "/chat/completions/abc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isChatPath(tc.rest); got != tc.want {
				t.Errorf("isChatPath(%q) = %v, want %v", tc.rest, got, tc.want)
			}
		})
	}
}
