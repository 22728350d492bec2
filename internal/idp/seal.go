package idp

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
)

// Refresh tokens are kept sealed (AES-256-GCM) under a key derived from
// the client secret: a copy of the database alone yields no usable token,
// and with the secret the token would be usable anyway, as a confidential
// client's refresh needs both. A new client secret makes the kept tokens
// unreadable, and the person's next sign-in keeps a new one.

func (p *Provider) aead() (cipher.AEAD, error) {
	if p.cfg.ClientSecret == "" {
		return nil, errors.New("no client secret to seal refresh tokens with")
	}
	key, err := hkdf.Key(sha256.New, []byte(p.cfg.ClientSecret), nil, "hookd refresh token "+p.cfg.Issuer, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// SealRefreshToken returns the refresh token sealed for the database, nil
// for none.
func (p *Provider) SealRefreshToken(token string) ([]byte, error) {
	if token == "" {
		return nil, nil
	}
	aead, err := p.aead()
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, []byte(token), []byte(p.cfg.ClientID)), nil
}

// OpenRefreshToken returns the refresh token SealRefreshToken sealed.
func (p *Provider) OpenRefreshToken(sealed []byte) (string, error) {
	aead, err := p.aead()
	if err != nil {
		return "", err
	}
	if len(sealed) < aead.NonceSize() {
		return "", errors.New("the kept refresh token is too short to be one hookd sealed")
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(p.cfg.ClientID))
	if err != nil {
		return "", errors.New("the kept refresh token cannot be opened: it was sealed under another client secret")
	}
	return string(plain), nil
}
