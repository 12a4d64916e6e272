# Sourced by the build-*.sh scripts that build a program from the Go module proxy.

# Unpacks module@version, as the proxy serves it, into a fresh `work` folder, writable, and
# prints the module's folder there. Built inside the module itself, not as a dependency: its
# go.mod's replace and exclude directives only apply there. Every step checked: called in
# `$(…)`, it runs without `set -e`.
unpack_go_module() {
  local module=$1 version=$2 work=$3 zip
  zip=$(go mod download -json "$module@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Zip"])') || return 1
  rm -rf "$work" && mkdir -p "$work" && unzip -q "$zip" -d "$work" && chmod -R u+w "$work" || return 1
  echo "$work/$module@$version"
}
