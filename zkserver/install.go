package zkserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNotInstalled is wrapped by every error caused by a missing Java runtime or
// a missing ZooKeeper installation, so callers can tell "install something"
// apart from "ZooKeeper failed to start".
var ErrNotInstalled = errors.New("zkserver: Apache ZooKeeper or Java is not installed")

const (
	// Debian's zookeeper package: the jar carries a Class-Path manifest naming
	// its dependencies, so it alone is a complete classpath.
	debianHome = "/usr/share/zookeeper"
	debianJar  = "/usr/share/java/zookeeper.jar"

	installZooKeeper = "sudo apt-get install -y zookeeper"
	installJava      = "sudo apt-get install -y openjdk-17-jre-headless"
)

// install is a located Java runtime plus the classpath that runs ZooKeeper.
type install struct {
	java      string
	classpath string
}

// Check reports whether a ZooKeeper server can be started with opts: Java must
// be found ($JAVA_HOME/bin/java, else java on PATH) and so must the ZooKeeper
// jar (opts.ZooKeeperHome, else $ZOOKEEPER_HOME, else Debian's
// /usr/share/java/zookeeper.jar). The error wraps ErrNotInstalled and spells
// out the command that fixes it.
func Check(opts Options) error {
	_, err := locate(opts)
	return err
}

func locate(opts Options) (install, error) {
	var problems []string
	java, jerr := findJava()
	if jerr != nil {
		problems = append(problems, fmt.Sprintf("%v\n    install Java with:  %s", jerr, installJava))
	}
	cp, zerr := findClasspath(opts.ZooKeeperHome)
	if zerr != nil {
		problems = append(problems, fmt.Sprintf("%v\n    install ZooKeeper with:  %s\n    (or set ZOOKEEPER_HOME to an Apache ZooKeeper release directory)", zerr, installZooKeeper))
	}
	if len(problems) > 0 {
		return install{}, fmt.Errorf("%w:\n  %s", ErrNotInstalled, strings.Join(problems, "\n  "))
	}
	return install{java: java, classpath: cp}, nil
}

func findJava() (string, error) {
	// JAVA_HOME wins when it points at a usable runtime: that is how users pick
	// one JDK among several.
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if isExecutable(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", errors.New("no java executable on PATH (and none in $JAVA_HOME/bin)")
	}
	return p, nil
}

// findClasspath resolves the ZooKeeper home (explicit, then $ZOOKEEPER_HOME,
// then Debian's layout) to a Java classpath.
func findClasspath(home string) (string, error) {
	source := "ZooKeeperHome"
	if home == "" {
		home, source = os.Getenv("ZOOKEEPER_HOME"), "$ZOOKEEPER_HOME"
	}
	if home == "" {
		if isFile(debianJar) {
			return withBinding(debianJar), nil
		}
		return "", fmt.Errorf("ZooKeeper jar not found: %s does not exist and ZOOKEEPER_HOME is not set", debianJar)
	}
	home = filepath.Clean(home)
	if cp, ok := classpathFor(home); ok {
		return cp, nil
	}
	return "", fmt.Errorf("ZooKeeper jar not found in %s=%q (looked for a .jar file, lib/zookeeper-*.jar, zookeeper*.jar, and Debian's %s)", source, home, debianJar)
}

func classpathFor(home string) (string, bool) {
	fi, err := os.Stat(home)
	if err != nil {
		return "", false
	}
	if !fi.IsDir() {
		if strings.HasSuffix(home, ".jar") {
			return withBinding(home), true
		}
		return "", false
	}
	if home == debianHome && isFile(debianJar) {
		return withBinding(debianJar), true
	}
	// Apache binary release: lib/ holds ZooKeeper, its dependencies and a
	// logging backend; conf/ holds its logback configuration.
	if jars, _ := filepath.Glob(filepath.Join(home, "lib", "zookeeper-*.jar")); len(jars) > 0 {
		cp := filepath.Join(home, "lib", "*")
		if conf := filepath.Join(home, "conf"); isDir(conf) {
			cp = conf + string(os.PathListSeparator) + cp
		}
		return cp, true
	}
	// A directory holding the jar itself (e.g. a copy of /usr/share/java).
	for _, pattern := range []string{"zookeeper.jar", "zookeeper-[0-9]*.jar"} {
		if jars, _ := filepath.Glob(filepath.Join(home, pattern)); len(jars) > 0 {
			return withBinding(jars[0]), true
		}
	}
	return "", false
}

// withBinding adds slf4j-simple next to a jar that has only slf4j-api on its
// manifest classpath (Debian's). Without a binding slf4j discards every log
// line, and the output is what we read for bind errors and show on failures.
// It adds netty-codec there too, which the TLS client port needs and
// Debian's manifest leaves out (Options.ClientAuth).
func withBinding(jar string) string {
	cp := jar
	for _, extra := range []string{"slf4j-simple.jar", "netty-codec.jar"} {
		if p := filepath.Join(filepath.Dir(jar), extra); isFile(p) {
			cp += string(os.PathListSeparator) + p
		}
	}
	return cp
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
