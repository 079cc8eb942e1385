package replica

import (
	"strings"
	"testing"
)

func TestConfigValidation(t *testing.T) {
	good := testConfig(1)
	cases := []struct {
		field string
		edit  func(*Config)
	}{
		{"ReplicaID", func(c *Config) { c.ReplicaID = -1 }},
		{"MinInsyncReplicas", func(c *Config) { c.MinInsyncReplicas = 0 }},
		{"ReplicaLagTimeMaxMs", func(c *Config) { c.ReplicaLagTimeMaxMs = 0 }},
		{"AckWaitersMax", func(c *Config) { c.AckWaitersMax = 0 }},
	}
	for _, c := range cases {
		cfg := good
		c.edit(&cfg)
		if _, err := New(cfg, &fakeLog{}, 0); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("bad %s: error %v, want one naming the field", c.field, err)
		}
	}
	if _, err := New(good, nil, 0); err == nil {
		t.Errorf("nil log accepted")
	}
}
