package proxy

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// TestDeletingAResponseDeletesTheTurnsHiddenRounds has the official
// openai-go client delete the response it was shown after a turn that
// searched: the upstream stored each round of it, and only the gateway
// knew the other rounds' ids.
func TestDeletingAResponseDeletesTheTurnsHiddenRounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stream   bool
		replica  bool // the DELETE reaches another replica, sharing a Redis store
		otherKey bool // the DELETE comes with another tenant's key
		wantLeft bool // responses of the turn stay stored
	}{
		{"a whole answer's search rounds go with it", false, false, false, false},
		{"a stream's later rounds go with it", true, false, false, false},
		{"another replica sharing the store deletes them too", true, true, false, false},
		{"another tenant's key deletes none of them and leaves the turn whole", true, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
			gateway := replicas(t, model)
			base := gateway()
			ctx := context.Background()
			params, resp := storedSearchedTurn(t, model, base, tc.stream)
			if tc.replica {
				base = gateway()
			}
			client := sdkClient(base)
			if tc.otherKey {
				client = openai.NewClient(option.WithBaseURL(base+"/"), option.WithAPIKey("sk-other-tenant"), option.WithMaxRetries(0))
			}
			err := client.Responses.Delete(ctx, resp.ID)
			var refused *openai.Error
			switch {
			case tc.otherKey && (!errors.As(err, &refused) || refused.StatusCode != http.StatusNotFound):
				t.Fatalf("deleting %s with another tenant's key: %v; want the upstream's 404", resp.ID, err)
			case !tc.otherKey && err != nil:
				t.Fatalf("deleting %s: %v", resp.ID, err)
			}
			left := model.Stored()
			if got := len(left) > 0; got != tc.wantLeft {
				t.Errorf("stored after the delete: %v; want some left: %v", left, tc.wantLeft)
			}
			_, outputs := callOutputs(resp)
			params.PreviousResponseID = openai.String(resp.ID)
			params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
			if tc.wantLeft {
				// The owner's chain still reaches the turn's context:
				// another key's refused delete left its thread whole.
				if _, err := sdkResponse(ctx, t, sdkClient(base), params, false); err != nil {
					t.Errorf("the owner continuing from %s after another key's delete: %v", resp.ID, err)
				}
				return
			}
			// Continuing from the deleted id is refused naming that id,
			// not a round the client never saw.
			_, err = sdkResponse(ctx, t, client, params, false)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || !strings.Contains(apiErr.Message, resp.ID) {
				t.Errorf("continuing from the deleted %s: %v, want a 404 naming it", resp.ID, err)
			}
		})
	}
}

func TestDeletingAResponseTheGatewayDoesNotKnowGoesOnAsIs(t *testing.T) {
	model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
	client := sdkClient(newTestGateway(t, model))
	err := client.Responses.Delete(context.Background(), "resp_never_given")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("err = %v, want the upstream's 404", err)
	}
}
