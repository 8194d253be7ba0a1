# Sourced with $work set (gemini-hooks-e2e.sh, gemini/make-fixtures.sh): HOME under $work with a demo git
# project ($project), and Gemini CLI pointed at fake_gemini.py on $url for its API and every proxy.
export HOME="$work/home" TMPDIR="$work/home/tmp"
mkdir -p "$TMPDIR" "$HOME/.gemini"
project="$HOME/work/demo"
mkdir -p "$project"
(cd "$project" && git init -q -b main && echo "# demo" > README.md && git add README.md &&
  git -c user.name=demo -c user.email=demo@example.invalid commit -q -m demo)
url="http://127.0.0.1:18081"
export GOOGLE_GEMINI_BASE_URL="$url" GEMINI_API_KEY="fake-gemini-key" GEMINI_CLI_HOME="$HOME" NO_COLOR=1
export HTTPS_PROXY="$url" HTTP_PROXY="$url" ALL_PROXY="$url" https_proxy="$url" http_proxy="$url" all_proxy="$url"
export NO_PROXY="127.0.0.1,localhost" no_proxy="127.0.0.1,localhost"
