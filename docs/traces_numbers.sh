#!/bin/bash
# Regenerates every figure and number quoted in docs/traces.md.
set -e
cd "$(dirname "$0")/.."
go build -o /tmp/gclock ./cmd/gclock
rm -rf /tmp/demo1 /tmp/demo2 /tmp/demo3
echo "### demo default"; /tmp/gclock trace demo -dir /tmp/demo1
echo "### demo wander 0.2 + plots"; /tmp/gclock trace demo -dir /tmp/demo2 -wander-ppm 0.2 -plots docs/figures -chrome=false
echo "### demo latency 300ns"; /tmp/gclock trace demo -dir /tmp/demo3 -latency-min 300ns -wander-ppm 0.2 -chrome=false
echo "### best rtt"; /tmp/gclock trace demo -dir /tmp/demo6 -best-rtt 0.5 -chrome=false; /tmp/gclock trace demo -dir /tmp/demo7 -wander-ppm 0.2 -best-rtt 0.5 -chrome=false
echo "### info"; /tmp/gclock trace info /tmp/demo1/proc-01.gct
echo "### merge truth spline"; /tmp/gclock merge -method spline -truth /tmp/demo1 -chrome /tmp/demo1/spline.json -o /tmp/demo1/spline.gcm /tmp/demo1/proc-*.gct | grep -v "^[0-9]  *[0-9]  *[0-9]*  *[0-9]*  *0$" | head -30
echo "### clc gamma 1"; /tmp/gclock merge -method linear -clc -gamma 1 -min-latency 300ns /tmp/demo3/proc-*.gct | tail -9
echo "### clc gamma 0.99 (the default)"; /tmp/gclock merge -method linear -clc -min-latency 300ns /tmp/demo3/proc-*.gct | tail -9
echo "### rates"; for m in linear spline daemon; do /tmp/gclock merge -method $m /tmp/demo1/proc-*.gct | grep "^merged"; done
/tmp/gclock merge -chrome /tmp/x.json /tmp/demo1/proc-*.gct | grep "^merged"
uptime
