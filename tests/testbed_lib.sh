# shellcheck shell=bash
# What the testbed scripts share: installing Debian packages without leaving apt broken, and Debian
# source lists added in the machine's own format for as long as one command needs them.
#
# Sourced by tests/{slurm,pbs,swarm,kubernetes}/testbed.sh, which define log and die before sourcing it.
# Nothing here needs a path outside the checkout.

export DEBIAN_FRONTEND=noninteractive

# The one list this project ever adds to apt's sources (Debian's deb-src twins, see with_deb_src).
# (HPCJOBS_APT_ETC and HPCJOBS_OS_RELEASE exist for the tests of deb_src_twins.)
readonly HPCJOBS_APT_ETC=${HPCJOBS_APT_ETC:-/etc/apt}
readonly HPCJOBS_DEB_SRC_SOURCES=$HPCJOBS_APT_ETC/sources.list.d/hpcjobs-deb-src.sources
readonly HPCJOBS_DEB_SRC_LIST=$HPCJOBS_APT_ETC/sources.list.d/hpcjobs-deb-src.list
# scripts/test.sh builds Kubernetes while the other testbeds install packages: one apt user at a time
readonly HPCJOBS_APT_LOCK=/run/lock/hpcjobs-testbed-apt.lock
# every package apt_need installed (one name a line): the fresh-machine drill purges these and only these,
# never what the machine had before a testbed ran (kept outside the testbeds' state, which the drill removes)
readonly HPCJOBS_APT_RECORD=/var/lib/hpcjobs-testbed-packages.txt
# the tag on every /etc/hosts line a testbed adds, so that the fresh-machine drill can take it out again
readonly HPCJOBS_HOSTS_TAG="# added by the hpcjobs testbed"

apt_locked() {  # apt_locked COMMAND...: run an apt or dpkg command when no other testbed script is using apt
    # -o: the command's children (a daemon a postinst starts) do not inherit the lock
    flock -o -w 1800 "$HPCJOBS_APT_LOCK" "$@"
}

hosts_add() {  # hosts_add IP NAME: one tagged line in /etc/hosts
    printf '%s %s %s\n' "$1" "$2" "$HPCJOBS_HOSTS_TAG" >>/etc/hosts
}

dpkg_recover() {  # an interrupted dpkg (a killed install) makes every later apt-get refuse: finish it
    if [[ -n $(dpkg --audit 2>/dev/null) ]]; then
        log "dpkg was interrupted: dpkg --configure -a"
        apt_locked dpkg --configure -a >/dev/null 2>&1 || true
    fi
}

apt_need() {  # apt_need PACKAGE...: install the packages that are missing (apt-get update when needed)
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    dpkg_recover
    log "apt-get install ${missing[*]}"
    printf '%s\n' "${missing[@]}" >>"$HPCJOBS_APT_RECORD"  # before: a failed install may leave some in
    if apt_locked apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
        return 0
    fi
    log "apt-get install failed or the package lists are old: apt-get update, then again"
    apt_locked apt-get update -q >/dev/null || die "apt-get update failed (see its messages above)"
    apt_locked apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
        || { dpkg_recover; die "apt-get install ${missing[*]} failed (see its messages above)"; }
}

deb_src_twins() {  # prints deb-src copies of the machine's enabled Debian sources: FORMAT is deb822 or list
    local format=$1 codename
    # shellcheck source=/dev/null
    codename=$(. "${HPCJOBS_OS_RELEASE:-/etc/os-release}" && echo "${VERSION_CODENAME:-}")
    [[ -n $codename ]] || return 0
    if [[ $format == deb822 ]]; then
        # one stanza per enabled deb822 stanza whose Suites name this release; every other field (URIs,
        # Components, Signed-By) is copied as it is, so apt sees no conflicting option for the same site
        local f
        for f in "$HPCJOBS_APT_ETC"/sources.list.d/*.sources; do
            [[ -f $f && $f != "$HPCJOBS_DEB_SRC_SOURCES" ]] || continue
            awk -v rel="$codename" '
                function flush() {
                    if (n && types ~ /(^|[ \t])deb([ \t]|$)/ && types !~ /deb-src/ && enabled && suites ~ ("(^|[ \t])" rel "(-[a-z]+)?([ \t]|$)")) {
                        print "Types: deb-src"
                        for (i = 1; i <= n; i++) print lines[i]
                        print ""
                    }
                    n = 0; types = ""; suites = ""; enabled = 1
                }
                BEGIN { enabled = 1 }
                /^[ \t]*#/ { next }
                /^[ \t]*$/ { flush(); next }
                /^Types:/ { types = substr($0, 7); next }
                /^Suites:/ { suites = substr($0, 8) }
                /^Enabled:[ \t]*no/ { enabled = 0 }
                { lines[++n] = $0 }
                END { flush() }' "$f"
        done
    else
        # one-line form: "deb [options] URI suite components" becomes "deb-src [options] URI suite components"
        local f
        for f in "$HPCJOBS_APT_ETC"/sources.list "$HPCJOBS_APT_ETC"/sources.list.d/*.list; do
            [[ -f $f && $f != "$HPCJOBS_DEB_SRC_LIST" ]] || continue
            awk -v rel="$codename" '$1 == "deb" && $0 ~ ("[ \t]" rel "(-[a-z]+)?[ \t]") { $1 = "deb-src"; print }' "$f"
        done
    fi
}

deb_src_remove() {  # removes what with_deb_src added; safe to call at any time (also from a trap)
    if [[ -e $HPCJOBS_DEB_SRC_SOURCES || -e $HPCJOBS_DEB_SRC_LIST ]]; then
        rm -f "$HPCJOBS_DEB_SRC_SOURCES" "$HPCJOBS_DEB_SRC_LIST"
        log "removed the deb-src lists this script added"
    fi
}

with_deb_src() {  # with_deb_src COMMAND...: run COMMAND with Debian's source lists enabled, then remove them
    # Debian 12 ships /etc/apt/sources.list.d/debian.sources in deb822 form with Signed-By: a one-line
    # deb-src entry for the same site conflicts with it and breaks every later apt-get ("Conflicting values
    # set for option Signed-By"). So the source lists are copies of the machine's own stanzas, in its own
    # format, removed again by a trap whatever happens.
    local twins822 twinslist rc=0
    twins822=$(deb_src_twins deb822)
    twinslist=$(deb_src_twins list)
    [[ -n $twins822 || -n $twinslist ]] || die "no enabled Debian source for this release to copy as deb-src"
    # the lock is held while the lists are there, so no other script's apt-get update reads them
    local lock_fd
    exec {lock_fd}>>"$HPCJOBS_APT_LOCK"
    flock -w 1800 "$lock_fd" || die "apt stayed busy for 30 min ($HPCJOBS_APT_LOCK)"
    trap 'deb_src_remove' EXIT
    trap 'deb_src_remove; exit 130' INT TERM
    [[ -z $twins822 ]] || printf '%s\n' "$twins822" >"$HPCJOBS_DEB_SRC_SOURCES"
    [[ -z $twinslist ]] || printf '%s\n' "$twinslist" >"$HPCJOBS_DEB_SRC_LIST"
    log "added deb-src twins of the machine's Debian sources; apt-get update"
    if ! apt-get update -q >/dev/null; then
        deb_src_remove
        apt-get update -q >/dev/null 2>&1 || true
        exec {lock_fd}>&-
        die "apt-get update with the deb-src lists failed (they are removed again; apt works as before)"
    fi
    "$@" || rc=$?
    deb_src_remove
    trap - EXIT INT TERM
    exec {lock_fd}>&-
    return "$rc"
}
