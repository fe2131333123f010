#!/bin/sh
cd /test
./perf-collect -o /tmp/p.data \
  'user_events:my_tracepoint1 u8 field1; __rel_loc char[] field2; char[5] field3' \
  'user_events:my_tracepoint3 u8 field1; __rel_loc char[] field2; char[5] field3' \
  user_events:MyProviderName_L4K1 user_events:OtherProviderName_L5K23Gmygroup > /tmp/collect.log 2>&1 &
pid=$!
i=0
while ! grep -q 'OtherProviderName_L5K23Gmygroup # Used by perf' /sys/kernel/tracing/user_events_status 2>/dev/null; do
  i=$((i+1)); [ $i -gt 600 ] && { echo never enabled; cat /tmp/collect.log; exit 1; }
  sleep 0.1
done
cat /sys/kernel/tracing/user_events_status
./tracepoint-provider-sample
printf '\n\nx\n' | ./eventheader-provider-sample
sleep 0.5
kill -INT $pid; wait $pid
echo collect-status $?
cat /tmp/collect.log
./perf-decode /tmp/p.data > /tmp/decode.json 2>&1; echo decode $?
cat /tmp/decode.json
echo ==BASE64==
base64 /tmp/p.data
