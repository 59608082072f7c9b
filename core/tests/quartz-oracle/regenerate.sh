#!/bin/sh
# Regenerates fixture.tsv: asks Quartz again for every case (the first four columns of each
# line), keeping the comment lines. Add a case by appending a line with just those four columns,
# then run this script. Needs javac/java 17+ and Quartz's jar:
#   apt-get update && apt-get install -y libquartz2-java openjdk-17-jdk-headless
set -eu
here=$(cd "$(dirname "$0")" && pwd)
jar=${SHARDCRON_QUARTZ_JAR:-/usr/share/java/quartz2.jar}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
javac -nowarn -cp "$jar" -d "$work" "$here/QuartzOracle.java"
cut -f1-4 "$here/fixture.tsv" | java -cp "$jar:$work" QuartzOracle > "$work/fixture.tsv"
mv "$work/fixture.tsv" "$here/fixture.tsv"
