package config

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// HOOKD_DESTINATIONS_KEY is base64 of 32 bytes, decoded into the Config
// and redacted when printed; a bad one is refused naming the variable,
// never echoing the value.
func TestParseConfig_DestinationsKey(t *testing.T) {
	t.Parallel()
	raw := bytes.Repeat([]byte{7}, 32)
	cfg, err := Parse("serve", nil, envOf(map[string]string{"HOOKD_DESTINATIONS_KEY": base64.StdEncoding.EncodeToString(raw)}), new(bytes.Buffer))
	if err != nil || !bytes.Equal(cfg.DestinationsKey, raw) {
		t.Fatalf("a good key: %v, %v", err, []byte(cfg.DestinationsKey))
	}
	if s := fmt.Sprintf("%v %s", cfg.DestinationsKey, cfg.DestinationsKey); strings.Contains(s, "7") {
		t.Errorf("the key printed: %s", s)
	}
	if cfg, err := Parse("serve", nil, envOf(nil), new(bytes.Buffer)); err != nil || cfg.DestinationsKey != nil {
		t.Errorf("no key: %v, %v", err, cfg.DestinationsKey)
	}
	short := base64.StdEncoding.EncodeToString(raw[:16])
	_, err = Parse("serve", nil, envOf(map[string]string{"HOOKD_DESTINATIONS_KEY": short}), new(bytes.Buffer))
	if err == nil || !strings.Contains(err.Error(), "HOOKD_DESTINATIONS_KEY") || !strings.Contains(err.Error(), "16 bytes") ||
		strings.Contains(err.Error(), short) {
		t.Errorf("a 16-byte key: %v", err)
	}
}
