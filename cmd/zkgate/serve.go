package main

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/zkgate/zkgate/server"
)

const serveLong = `Serves the HTTP API and the dashboard, on an embedded ZooKeeper (Debian's
zookeeper package, data in --data-dir) unless --zk names an ensemble.

Every flag has an environment twin, named in parentheses (ZKGATE_LISTEN for
--listen), which the flag overrides; the packaged zkgate.service reads them
from /etc/zkgate/zkgate.env.

Traces (OpenTelemetry, OTLP over HTTP) are off unless the standard
environment asks for them: OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_TRACES_EXPORTER=otlp), with
OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG and OTEL_SERVICE_NAME; see
docs/operations.md, Traces.

SIGTERM hands the gateway's leases over (--handover) and drains it for up
to --drain-timeout, then stops it and its embedded ZooKeeper; SIGHUP
reloads the --auth-file tokens.`

// newServeCommand is zkgate serve. Its flags are server.ParseConfig's,
// which parses serve's arguments itself (as Go's flag package does:
// -listen and --listen alike): the flags cobra lists, completes and puts
// in the man page are read from that flag set's own defaults, so there is
// one definition of them.
func newServeCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:                "serve [flags]",
		Short:              "serve the HTTP API and the dashboard",
		Long:               serveLong,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			var help bytes.Buffer
			cfg, err := server.ParseConfig(args, a.getenv, &help)
			if help.Len() > 0 { // -h: ParseConfig printed its flags' defaults
				return cmd.Help()
			}
			if err != nil {
				return err
			}
			return server.Run(cmd.Context(), cfg, a.stdout, a.stderr)
		},
	}
	for _, f := range serveFlags() {
		if f.boolean {
			v, _ := strconv.ParseBool(f.def)
			cmd.Flags().Bool(f.name, v, f.usage)
		} else {
			cmd.Flags().Var(&kindedValue{v: f.def, kind: f.kind}, f.name, f.usage)
		}
	}
	return cmd
}

// kindedValue is a serve flag as cobra lists it: its default, and what its
// value is (a duration, a size...) where pflag would say "string".
type kindedValue struct{ v, kind string }

func (k *kindedValue) String() string     { return k.v }
func (k *kindedValue) Set(s string) error { k.v = s; return nil }
func (k *kindedValue) Type() string       { return k.kind }

// serveFlag is one flag of server.ParseConfig.
type serveFlag struct {
	name, def, usage, kind string
	boolean                bool
}

// serveFlags are the flags of server.ParseConfig with their built-in
// defaults, never a secret from the environment.
func serveFlags() []serveFlag {
	var flags []serveFlag
	for _, f := range server.ConfigFlags() {
		b, ok := f.Value.(interface{ IsBoolFlag() bool })
		kind := "string"
		if k, ok := f.Value.(interface{ Kind() string }); ok {
			kind = k.Kind()
		}
		flags = append(flags, serveFlag{name: f.Name, def: f.DefValue, usage: f.Usage, kind: kind, boolean: ok && b.IsBoolFlag()})
	}
	return flags
}

// serveHasFlag reports whether zkgate serve has the flag name.
func serveHasFlag(name string) bool {
	name, _, _ = strings.Cut(name, "=")
	for _, f := range serveFlags() {
		if f.name == name {
			return true
		}
	}
	return false
}
