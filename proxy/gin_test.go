package proxy

import (
	"net/http"
	"os"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestMain runs the tests with gin's router in the mode cmd/gateway sets:
// in its default debug mode gin prints every route of every gateway a
// test builds.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(m.Run())
}

// TestBuildingAGatewayLeavesGinsModeToTheProgram: gin's mode is
// process-wide, and a program that embeds the gateway next to gin routes
// of its own keeps the mode it chose.
func TestBuildingAGatewayLeavesGinsModeToTheProgram(t *testing.T) {
	defer gin.SetMode(gin.Mode())
	for _, mode := range []string{gin.DebugMode, gin.TestMode} {
		t.Run("a program in "+mode+" mode stays in it", func(t *testing.T) {
			gin.SetMode(mode)
			_ = testGateway(t, http.NotFoundHandler()).Handler()
			if got := gin.Mode(); got != mode {
				t.Errorf("gin's mode is %q after Handler; want the program's %q", got, mode)
			}
		})
	}
}
