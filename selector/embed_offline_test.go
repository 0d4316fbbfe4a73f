package selector

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestDotSumsInFourLanes pins dot's summation order: lane i%4 into its own
// sum in order of i, the remainder into the first, the four added left to
// right. Rankings compare scores bit for bit (ties break by document), so
// a faster dot must not move a single bit.
func TestDotSumsInFourLanes(t *testing.T) {
	lanes := func(a, b []float32) float32 {
		var s [4]float32
		n := len(a) - len(a)%4
		for i := 0; i < n; i++ {
			s[i%4] += a[i] * b[i]
		}
		for i := n; i < len(a); i++ {
			s[0] += a[i] * b[i]
		}
		return s[0] + s[1] + s[2] + s[3]
	}
	rng := rand.New(rand.NewPCG(1, 2))
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for _, n := range []int{0, 1, 3, 4, 5, 7, 8, 13, 64, 99, 100} {
		t.Run("vectors of length "+strconv.Itoa(n)+" sum as four lanes", func(t *testing.T) {
			for range 200 {
				a, b := vec(n), vec(n+2) // b may be longer: only len(a) counts
				if got, want := dot(a, b), lanes(a, b[:n]); math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("dot = %v, four-lane sum = %v", got, want)
				}
			}
		})
	}
}

func TestDotOfMismatchedLengths(t *testing.T) {
	tests := []struct {
		name string
		a, b []float32
		want float32
	}{
		{"a second vector shorter than the first has no similarity instead of a panic", []float32{1, 2, 3}, []float32{1, 2}, 0},
		{"a second vector longer than the first counts only the first's length", []float32{1, 2}, []float32{1, 2, 3}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dot(tt.a, tt.b); got != tt.want {
				t.Errorf("dot = %v, want %v", got, tt.want)
			}
		})
	}
}
