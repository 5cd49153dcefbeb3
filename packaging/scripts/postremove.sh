#!/bin/sh
# After removing zkgate: systemd forgets the unit. The user and
# /var/lib/zkgate stay, as the data of the embedded ZooKeeper may matter.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
