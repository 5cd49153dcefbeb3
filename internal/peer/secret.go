// Package peer holds what the gateways of one ZooKeeper root share to
// prove themselves to each other: the secret of --peer-secret-file, the
// proofs it makes (an HMAC-SHA256 over a purpose and a list of fields),
// and the memory of the proofs already taken, against replays.
//
// Nothing found in ZooKeeper is trusted for what it says of a gateway:
// anyone who may write under the root may write a registration or a lease
// record. What one gateway writes there, and every request it forwards to
// another, carries a proof that only a holder of the secret can make.
package peer

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// MinSecretLen is the shortest secret taken: 32 bytes, as many as the
// HMAC-SHA256 key the proofs use.
const MinSecretLen = 32

// maxSecretFile bounds what is read of a secret file.
const maxSecretFile = 64 << 10

// secretPrefix starts every secret NewSecret makes, so that a leaked one is
// easy to recognise.
const secretPrefix = "zkp_"

// Secret is the shared secret of the gateways: one or more keys, the first
// of which makes every proof while each of them is taken in a check, so
// that a new secret can be rolled out one gateway at a time.
type Secret struct {
	keys [][]byte
}

// NewSecret makes a secret: 32 random bytes, URL-safe base64.
func NewSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return secretPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// LoadSecret reads a secret file: one secret a line (blank lines and lines
// starting with # are skipped), each at least MinSecretLen bytes; the first
// signs, every one is taken.
func LoadSecret(path string) (*Secret, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s: %v", path, pe.Err)
		}
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxSecretFile+1)); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if buf.Len() > maxSecretFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxSecretFile)
	}
	return ParseSecret(path, buf.Bytes())
}

// ParseSecret reads the text of a secret file; path only names it in errors.
func ParseSecret(path string, data []byte) (*Secret, error) {
	s := &Secret{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		if len(text) < MinSecretLen {
			return nil, fmt.Errorf("%s, line %d: a secret of %d bytes; it must have at least %d (make one with: zkgate peer-secret new)",
				path, line, len(text), MinSecretLen)
		}
		s.keys = append(s.keys, []byte(text))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(s.keys) == 0 {
		return nil, fmt.Errorf("%s holds no secret (make one with: zkgate peer-secret new)", path)
	}
	return s, nil
}

// Sign is the proof, with the first key, of fields for purpose: URL-safe
// base64 of an HMAC-SHA256.
func (s *Secret) Sign(purpose string, fields ...string) string {
	return base64.RawURLEncoding.EncodeToString(mac(s.keys[0], purpose, fields))
}

// Check reports whether proof is a proof of fields for purpose with one of
// the keys. The comparison takes the same time wherever they differ.
func (s *Secret) Check(proof, purpose string, fields ...string) bool {
	got, err := base64.RawURLEncoding.DecodeString(proof)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	ok := false
	for _, k := range s.keys {
		if hmac.Equal(got, mac(k, purpose, fields)) {
			ok = true
		}
	}
	return ok
}

// mac is the HMAC-SHA256 under key of purpose and fields, each prefixed by
// its length, so that no two lists of fields read the same.
func mac(key []byte, purpose string, fields []string) []byte {
	h := hmac.New(sha256.New, key)
	var n [binary.MaxVarintLen64]byte
	for _, f := range append([]string{"zkgate-peer-v1", purpose}, fields...) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		h.Write([]byte(f))
	}
	return h.Sum(nil)
}

// Seal encrypts plaintext for the other gateways, bound to context (which
// must be given again to Open): AES-256-GCM, with a key derived from the
// first key for that use alone, and a random nonce before the ciphertext;
// URL-safe base64. What passes between gateways over plain HTTP is proven
// by its MAC; what must also stay secret there (a ZooKeeper session's
// password) is sealed.
func (s *Secret) Seal(plaintext []byte, context string) (string, error) {
	aead, err := sealer(s.keys[0])
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, plaintext, []byte(context))), nil
}

// Open decrypts what Seal made with one of the keys, for the same context.
func (s *Secret) Open(sealed, context string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil {
		return nil, errors.New("sealed data that is not base64")
	}
	for _, k := range s.keys {
		aead, err := sealer(k)
		if err != nil {
			return nil, err
		}
		if len(b) < aead.NonceSize() {
			break
		}
		if out, err := aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], []byte(context)); err == nil {
			return out, nil
		}
	}
	return nil, errors.New("sealed data that none of the keys opens")
}

// sealer is the AES-256-GCM of the key derived from key for sealing.
func sealer(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(mac(key, "seal", nil))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
