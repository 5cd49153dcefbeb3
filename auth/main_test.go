package auth_test

import (
	"testing"

	"github.com/zkgate/zkgate/internal/gwtest"
)

func TestMain(m *testing.M) { gwtest.Main(m) }
