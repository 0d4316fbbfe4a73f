package main

import (
	"os"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestMain runs the package's tests with gin in release mode, as main
// sets it: the tests run the router as the program does, and gin's debug
// mode would print every route of every gateway they start.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(m.Run())
}
