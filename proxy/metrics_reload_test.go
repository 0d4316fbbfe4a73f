package proxy

import (
	"errors"
	"testing"
)

// gathered returns the value of each policy series in m's registry by
// name and result label, missing series absent.
func gathered(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range s.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			switch {
			case s.Counter != nil:
				out[name] = s.Counter.GetValue()
			case s.Gauge != nil:
				out[name] = s.Gauge.GetValue()
			}
		}
	}
	return out
}

func TestPolicyReloadMetricsExistFromTheStartAndSayWhetherTheFileIsGood(t *testing.T) {
	m := NewMetrics()
	const ok, failed, fileOK = "toolgate_policy_reloads_total{result=ok}", "toolgate_policy_reloads_total{result=error}", "toolgate_policy_file_ok"
	for _, st := range []struct {
		name   string
		reload func()
		want   map[string]float64
	}{
		{"before any reload both results are 0 and the file is good", func() {}, map[string]float64{ok: 0, failed: 0, fileOK: 1}},
		{"a failed reload counts and marks the file broken", func() { m.PolicyReloaded(errors.New("bad yaml")) }, map[string]float64{ok: 0, failed: 1, fileOK: 0}},
		{"the file stays broken until a reload succeeds", func() { m.PolicyReloaded(errors.New("still bad")) }, map[string]float64{ok: 0, failed: 2, fileOK: 0}},
		{"a successful reload counts and marks the file good", func() { m.PolicyReloaded(nil) }, map[string]float64{ok: 1, failed: 2, fileOK: 1}},
	} {
		t.Run(st.name, func(t *testing.T) {
			st.reload()
			got := gathered(t, m)
			for series, want := range st.want {
				if v, present := got[series]; !present || v != want {
					t.Errorf("%s = %v (present %v), want %v", series, v, present, want)
				}
			}
		})
	}
}
