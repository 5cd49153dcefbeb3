// Package zkgate holds the files embedded into the gateway binary.
package zkgate

import _ "embed"

// OpenAPI is the API contract, served at /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
