package bench

import "github.com/gin-gonic/gin"

// The tests run gin's router in the mode cmd/gateway sets: in its
// default debug mode gin prints every route of every gateway a test
// builds.
func init() { gin.SetMode(gin.ReleaseMode) }
