package destinations

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// The signing secrets and extra headers of a destination managed on the
// dashboard are kept sealed (AES-256-GCM, a random nonce per value, the
// nonce before the ciphertext) under HOOKD_DESTINATIONS_KEY: a copy of the
// database alone yields no credential of the apps. The destination's name
// and the value's kind are the additional data, so a sealed value copied
// to another row or column does not open.

// KeySize is HOOKD_DESTINATIONS_KEY's length once decoded: AES-256's.
const KeySize = 32

// ParseKey decodes HOOKD_DESTINATIONS_KEY: the standard base64 of 32
// random bytes (openssl rand -base64 32).
func ParseKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, errors.New("not base64 (make one with: openssl rand -base64 32)")
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("%d bytes once decoded, want %d (make one with: openssl rand -base64 32)", len(key), KeySize)
	}
	return key, nil
}

// ErrNoKey is a value to seal or open without HOOKD_DESTINATIONS_KEY.
var ErrNoKey = errors.New("HOOKD_DESTINATIONS_KEY is not set: the signing secrets and headers of the dashboard's " +
	"destinations are kept encrypted under it (make one with: openssl rand -base64 32)")

func aead(key []byte) (cipher.AEAD, error) {
	if len(key) == 0 {
		return nil, ErrNoKey
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// sealData is the additional data of destination name's value of kind.
func sealData(name, kind string) []byte {
	return []byte("hookd destination " + name + " " + kind)
}

// Seal seals plain, destination name's value of kind (signing_secrets,
// headers), under key.
func Seal(key []byte, name, kind string, plain []byte) ([]byte, error) {
	a, err := aead(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, a.NonceSize())
	_, _ = rand.Read(nonce)
	return a.Seal(nonce, nonce, plain, sealData(name, kind)), nil
}

// Open opens what Seal sealed for the same name and kind.
func Open(key []byte, name, kind string, sealed []byte) ([]byte, error) {
	a, err := aead(key)
	if err != nil {
		return nil, err
	}
	if len(sealed) < a.NonceSize() {
		return nil, fmt.Errorf("destination %q: %s: too short to be a value hookd sealed", name, kind)
	}
	plain, err := a.Open(nil, sealed[:a.NonceSize()], sealed[a.NonceSize():], sealData(name, kind))
	if err != nil {
		return nil, fmt.Errorf("destination %q: %s: cannot be opened with HOOKD_DESTINATIONS_KEY: it was sealed under another key", name, kind)
	}
	return plain, nil
}
