package server_test

import (
	"testing"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

func TestMain(m *testing.M) { gwtest.Main(m) }
