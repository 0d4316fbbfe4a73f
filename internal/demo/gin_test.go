package demo

import (
	"os"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestMain runs the package's tests with gin's router in the mode
// cmd/gateway sets: in its default debug mode gin prints every route of
// every gateway a test builds.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(m.Run())
}
