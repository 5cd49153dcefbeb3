#!/bin/sh
# Before removing zkgate (not on an upgrade): stop the service, drained.
set -e
case "$1" in
remove | purge | 0)
	if [ -d /run/systemd/system ]; then
		systemctl disable --now zkgate.service >/dev/null 2>&1 || true
	fi
	;;
esac
