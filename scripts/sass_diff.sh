#!/bin/bash
# The identical-SASS gate for refactors: the SASS of kernel objects saved before a change (BEFORE=dir of
# .o files copied from build/CMakeFiles) against the build's objects of the same names, instruction text
# only (addresses and encodings dropped). NORM=1 also masks constant-bank offsets and other immediates,
# for changes that only move kernel parameters; then check by eye that the masked lines differ by one
# offset. Usage: BEFORE=/tmp/before [NORM=1] scripts/sass_diff.sh
cd "$(dirname "$0")/.."
CU=${CUOBJDUMP:-$(command -v cuobjdump || echo deps/cudabin/nvidia/cu13/bin/cuobjdump)}
same=0; diff=0
for o in ${BEFORE:-/tmp/before_objs}/*.o; do
  b=$(basename $o)
  n=$(find build/CMakeFiles -name "$b" | head -1)
  f() { $CU -sass $1 | grep -v "^\s*$\|Fatbin\|code for\|arch =\|Compiled\|identifier\|host =\|ELF\|Function :" | sed -E 's#/\* *(0x)?[0-9a-f]* *\*/##g; s/ +$//' | { if [ "${NORM:-0}" = 1 ]; then sed -E 's/c\[0x0\]\[0x[0-9a-f]+\]/c[0x0][X]/g; s/0x[0-9a-f]+/X/g'; else cat; fi; }; }
  f $o > /tmp/s1.txt; f $n > /tmp/s2.txt
  if cmp -s /tmp/s1.txt /tmp/s2.txt; then same=$((same+1)); else diff=$((diff+1)); echo "DIFF $b $(diff /tmp/s1.txt /tmp/s2.txt | grep -c '^<')"; fi
done
echo "same $same diff $diff"
