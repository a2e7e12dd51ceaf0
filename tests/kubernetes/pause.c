/* A pod sandbox's "pause" process for the Kubernetes testbed: holds the pod's namespaces, reaps
 * zombies, exits 0 on SIGINT or SIGTERM. Written for this project (no registry is reachable in CI to
 * pull the upstream pause image); it does what the kubelet expects of that image's entrypoint.
 * Build: gcc -static -O2 -o pause pause.c */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
    (void)sig;
    _exit(0);
}

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction quit = {.sa_handler = stop};
    struct sigaction child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    if (sigaction(SIGINT, &quit, NULL) < 0 || sigaction(SIGTERM, &quit, NULL) < 0 ||
        sigaction(SIGCHLD, &child, NULL) < 0) {
        return 1;
    }
    for (;;) {
        pause();
    }
    return 42;
}
