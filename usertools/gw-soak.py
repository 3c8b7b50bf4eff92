#!/usr/bin/env python3
"""Soak: gw-soak jobs back to back for a given time, each with a random transport, rank count,
schedule and faults, every result checked (issue 24 item 8).

Transports: tcp (1-4 streams), dpdk on the in-process ring bus (ranks as threads) and dpdk memif
(2 processes), both with random injected drops, duplicates, reordering and corruption. On a
quarter of the multi-process jobs one rank (not rank 0, which serves the store) is killed
(SIGKILL) or stopped (SIGSTOP) at a random moment: the job must then end with an error on every
survivor within the bound (kill: 2 s; stop: the collective timeout + 1 s), and the survivors'
errors should name the rank that was hit. A third of the jobs without a fault have compute
gaps: before 1-3 of its collectives one rank makes no call for 0.1-30 s (a trainer loading
data or writing a checkpoint), which the transport's progress thread must carry it through.

  /usr/bin/python3 usertools/gw-soak.py --minutes 30 [--build build] [--out DIR] [--seed S]
      [--kinds tcp,ring,memif]

Prints one line per job and a Markdown summary; DIR holds every job's output (jobs.jsonl).
Exit status 1 when any job gave a wrong result, hung, or failed with no fault injected.
"""
import argparse, json, os, random, re, signal, subprocess, sys, tempfile, time

TIMEOUT_MS = 5000  # collective timeout of the fault jobs: a stopped rank is noticed after it


def children(pid):
    """{rank: pid} of the launcher's children (their GW_RANK)."""
    out = {}
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open(f'/proc/{d}/stat') as f:
                ppid = int(f.read().rsplit(')', 1)[1].split()[1])
            if ppid != pid:
                continue
            with open(f'/proc/{d}/environ', 'rb') as f:
                env = dict(e.split(b'=', 1) for e in f.read().split(b'\0') if b'=' in e)
            if b'GW_RANK' in env:
                out[int(env[b'GW_RANK'])] = int(d)
        except (OSError, ValueError, IndexError):
            pass
    return out


def faults(rng):
    p = lambda hi: round(rng.uniform(0, hi), 4)
    f = f',tx_drop={p(0.03)},tx_dup={p(0.01)},tx_reorder={p(0.02)},rx_drop={p(0.01)}'
    if rng.random() < 0.3:
        f += f',rx_corrupt={p(0.005)},checksum=on'
    return f + f',fault_seed={rng.randrange(1, 1 << 30)}'


def plan(rng, job, tmp, kinds=('tcp', 'ring', 'memif')):
    weights = {'tcp': 5, 'ring': 3, 'memif': 2}
    kind = rng.choices(list(kinds), [weights[k] for k in kinds])[0]
    ranks = 2 if kind == 'memif' else rng.randint(2, 4)
    spec = {'tcp': f'tcp:iface=lo,streams={rng.randint(1, 4)}',
            'ring': f'dpdk:ring=soak{os.getpid()}x{job}' + faults(rng),
            'memif': f'dpdk:vdev=net_memif0,role=auto,socket={tmp}/m{job}.sock' + faults(rng)}[kind]
    args = ['--ranks', str(ranks), '-t', spec, '--seed', str(rng.randrange(1 << 31)),
            '--ops', str(rng.randint(40, 250)), '--max-count', str(rng.choice([1000, 30000, 300000]))]
    if kind == 'ring':
        args.append('--threads')
    if ranks >= 3 and rng.random() < 0.5:
        args += ['--servers', '1', '--ps-rounds', str(rng.randint(2, 10))]
    hit = None
    if kind != 'ring' and ranks >= 2 and rng.random() < 0.25:
        hit = (rng.choice(['SIGKILL', 'SIGSTOP']), rng.randint(1, ranks - 1), rng.uniform(0.1, 1.5))
        args += ['--timeout-ms', str(TIMEOUT_MS)]
    else:
        args += ['--timeout-ms', '60000']
        if rng.random() < 0.33:
            args += ['--gaps', str(rng.randint(1, 3)), '--gap-max-ms',
                     str(rng.choice([1000, 5000, 30000]))]
    return kind, args, hit


def run_job(exe, args, hit, wall, log):
    env = dict(os.environ, GW_LOG_LEVEL='warn')
    t0 = time.monotonic()
    p = subprocess.Popen([exe] + args, stdout=log, stderr=subprocess.STDOUT, env=env,
                         start_new_session=True)
    hit_at = None
    hung = False
    while p.poll() is None:
        now = time.monotonic() - t0
        if hit and hit_at is None and now >= hit[2]:
            pid = children(p.pid).get(hit[1])
            if pid:
                os.kill(pid, getattr(signal, hit[0]))
                hit_at = time.monotonic()
            else:
                hit = None  # the job ended or the rank is gone: no fault
        if now > wall:
            hung = True
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            break
        time.sleep(0.01)
    end = time.monotonic()
    if hit_at is not None:  # a stopped rank is reaped by the launcher; make sure nothing stays
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return p.returncode, hung, end - t0, (end - hit_at) if hit_at else None


def classify(rc, hung, text, hit, after):
    if 'WRONG RESULT' in text:
        return 'wrong'
    if hung:
        return 'hang'
    if after is None:
        return 'ok' if rc == 0 else 'error-without-fault'
    if rc == 0:
        return 'fault-missed'  # the job finished before the signal landed
    bound = 2.0 if hit[0] == 'SIGKILL' else TIMEOUT_MS / 1000 + 1.0
    return 'reported' if after <= bound + 1.0 else 'reported-late'


ERROR_LINE = re.compile(r'^gw-soak: rank (\d+): (.*?): .*\[culprit: (rank (\d+)|unknown)\]$')


def named(text, victim):
    """Survivors' error lines, how many name the victim in their structured culprit field
    (gw-soak prints Status::rank() as "[culprit: rank V]"), and where each rank failed."""
    lines = [m for m in map(ERROR_LINE.match, text.splitlines()) if m]
    right = [m for m in lines if m.group(4) is not None and int(m.group(4)) == victim]
    where = sorted({phase(m.group(2)) for m in lines})
    return len(lines), len(right), where


def phase(what):
    """Coarse place of a failure: set-up, collective op, PS, or a final store barrier."""
    if what.startswith('op '):
        return 'op'
    if what.startswith('end of'):
        return 'barrier'
    return 'ps' if what.startswith('PS') else 'set-up'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--minutes', type=float, default=30)
    ap.add_argument('--build', default='build')
    ap.add_argument('--out', default=None)
    ap.add_argument('--seed', type=int, default=int(time.time()))
    ap.add_argument('--kinds', default='tcp,ring,memif',
                    help='transports to draw from, e.g. memif alone for its teardown')
    a = ap.parse_args()
    kinds = tuple(k for k in a.kinds.split(',') if k)
    if not kinds or any(k not in ('tcp', 'ring', 'memif') for k in kinds):
        ap.error('--kinds: a comma list of tcp, ring, memif')
    exe = os.path.join(a.build, 'apps/gw-soak/gw-soak')
    out = a.out or tempfile.mkdtemp(prefix='gw-soak-')
    os.makedirs(out, exist_ok=True)
    rng = random.Random(a.seed)
    tmp = tempfile.mkdtemp(prefix='gw-soak-sock-')
    stop_at = time.monotonic() + a.minutes * 60
    results, job = [], 0
    print(f'# gw-soak.py: seed {a.seed}, {a.minutes} min, logs in {out}', flush=True)
    with open(os.path.join(out, 'jobs.jsonl'), 'w') as jl:
        while time.monotonic() < stop_at:
            job += 1
            kind, args, hit = plan(rng, job, tmp, kinds)
            path = os.path.join(out, f'job{job}.log')
            with open(path, 'w') as log:
                rc, hung, secs, after = run_job(exe, args, hit, 240, log)
            text = open(path, errors='replace').read()
            verdict = classify(rc, hung, text, hit, after)
            r = {'job': job, 'kind': kind, 'args': args, 'hit': hit, 'rc': rc, 'secs': round(secs, 2),
                 'after_fault_s': round(after, 3) if after is not None else None,
                 'verdict': verdict}
            if after is not None:
                r['survivor_errors'], r['naming_victim'], r['where'] = named(text, hit[1])
            results.append(r)
            jl.write(json.dumps(r) + '\n')
            jl.flush()
            print(f"job {job} {kind} {verdict} rc={rc} {secs:.1f}s"
                  + (f" {hit[0]} rank {hit[1]}: ended {after:.2f}s after, "
                     f"{r['naming_victim']}/{r['survivor_errors']} errors name it" if after else ''),
                  flush=True)
    summary(results)
    bad = [r for r in results if r['verdict'] in ('wrong', 'hang', 'error-without-fault')]
    return 1 if bad else 0


def summary(results):
    from collections import Counter
    print('\n| transport | jobs | ok | faults reported (late) | missed | wrong | hang | error w/o fault |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|')
    for kind in ('tcp', 'ring', 'memif'):
        c = Counter(r['verdict'] for r in results if r['kind'] == kind)
        n = sum(c.values())
        print(f"| {kind} | {n} | {c['ok']} | {c['reported']} ({c['reported-late']}) | "
              f"{c['fault-missed']} | {c['wrong']} | {c['hang']} | {c['error-without-fault']} |")
    hits = [r for r in results if r['after_fault_s'] is not None and r['rc'] != 0]
    for sig in ('SIGKILL', 'SIGSTOP'):
        h = [r for r in hits if r['hit'][0] == sig]
        if h:
            worst = max(r['after_fault_s'] for r in h)
            named_all = sum(1 for r in h if r['survivor_errors'] and
                            r['naming_victim'] == r['survivor_errors'])
            print(f'\n{sig}: {len(h)} jobs, worst end {worst:.2f} s after the signal; every '
                  f'survivor error names the victim in {named_all} of {len(h)}')
            for where in sorted({w for r in h for w in r.get('where', [])}):
                hw = [r for r in h if where in r.get('where', [])]
                ends = sorted(r['after_fault_s'] for r in hw)
                ok = sum(1 for r in hw if r['naming_victim'] == r['survivor_errors'])
                print(f'  failed in {where}: {len(hw)} jobs, ended {ends[len(ends) // 2]:.2f} s '
                      f'(median) / {ends[-1]:.2f} s (worst) after; victim named by every survivor '
                      f'in {ok}')


if __name__ == '__main__':
    sys.exit(main())
