#!/usr/bin/env python3
"""Regenerates the OVS test-vector files in this directory.

The inputs are the match and action vectors of Open vSwitch 3.1's own test suite
(tests/ovs-ofctl.at "parse-oxm", tests/ofp-actions.at); the verdicts are what the installed
ovs-ofctl 3.1 says about each of them for OpenFlow 1.3 (`--strict parse-oxm OpenFlow13`,
`parse-actions OpenFlow13`, `parse-instructions OpenFlow13`). The oracle test
`oracle::ovs_vectors_are_what_ovs_ofctl_says` runs the same ovs-ofctl commands again and
checks that the files still hold their answers.

Usage: regen.py OVS_SOURCE_DIR   (a checkout of openvswitch/ovs at v3.1.0)
"""
import re
import subprocess
import sys

HERE = __file__.rsplit('/', 1)[0]
WIDTHS = {'u8': 1, 'be16': 2, 'be32': 4, 'be64': 8, 'be128': 16, 'MAC': 6, 'IPv6': 16}
CLASSES = {'NXM_OF': 0x0000, 'NXM_NX': 0x0001, 'OXM_OF': 0x8000, 'OXM_OF_PKT': 0x8001}
EXPERIMENTERS = {'ONFOXM_ET': 0x4f4e4600, 'NXOXM_ET': 0x00002320, 'NXOXM_NSH': 0x005ad650}


def field_headers(meta_flow_h):
    """NAME -> (class, field, width, experimenter) from meta-flow.h's field comments."""
    out = {}
    width = None
    for line in open(meta_flow_h):
        m = re.search(r'\* Type: (\w+)', line)
        if m:
            width = WIDTHS.get(m.group(1))
        for m in re.finditer(r'(NXM|OXM): ((?:NXM_OF|NXM_NX|OXM_OF|ONFOXM_ET|NXOXM_ET|NXOXM_NSH)_\w+?)\((\d+)\)', line):
            name, number = m.group(2), int(m.group(3))
            if '<N>' in line or width is None:
                continue
            prefix = next(p for p in ('OXM_OF_PKT', 'NXM_OF', 'NXM_NX', 'OXM_OF',
                                      'ONFOXM_ET', 'NXOXM_ET', 'NXOXM_NSH') if name.startswith(p))
            if prefix in EXPERIMENTERS:
                out[name] = (0xffff, number, width, EXPERIMENTERS[prefix])
            else:
                out[name] = (CLASSES[prefix], number, width, None)
    for n in range(16):
        out['NXM_NX_REG%d' % n] = (0x0001, n, 4, None)
    for n in range(8):
        out['OXM_OF_PKT_REG%d' % n] = (0x8001, n, 8, None)
    return out


def tlv(name, payload, headers):
    masked = name.endswith('_W')
    base = name[:-2] if masked else name
    if re.fullmatch(r'[0-9a-fA-F]{8}|[0-9a-fA-F]{16}', base):
        head = bytes.fromhex(base)
        return head + bytes.fromhex(payload.replace('/', ''))
    cls, field, width, exp = headers[base]
    value = bytes.fromhex(payload.replace('/', ''))
    length = len(value) + (4 if exp is not None else 0)
    header = (cls << 16) | (field << 9) | (int(masked) << 8) | length
    out = header.to_bytes(4, 'big')
    if exp is not None:
        out += exp.to_bytes(4, 'big')
    return out + value


def symbolic_to_hex(text, headers):
    text = text.split('#')[0]
    entries = re.findall(r'([A-Za-z0-9_]+)\(([0-9a-fA-F/]*)\)', text)
    return b''.join(tlv(n, p, headers) for n, p in entries).hex()


def ovs_ofctl(args, stdin):
    r = subprocess.run(['ovs-ofctl'] + args, input=stdin, capture_output=True, text=True)
    return r.stdout.splitlines()


def block(at_file, start_marker, end_marker):
    text = open(at_file).read()
    start = text.index(start_marker) + len(start_marker)
    return text[start:text.index(end_marker, start)]


def oxm_vectors(ovs):
    headers = field_headers(ovs + '/include/openvswitch/meta-flow.h')
    data = block(ovs + '/tests/ovs-ofctl.at', 'AT_SETUP([ovs-ofctl parse-oxm (OpenFlow 1.2)])\nAT_KEYWORDS([oxm])\nAT_DATA([oxm.txt], [dnl\n', '])\n')
    lines = [l for l in data.splitlines() if l.strip() and not l.startswith('#') and l != '<any>']
    verdicts = ovs_ofctl(['--strict', 'parse-oxm', 'OpenFlow13'], '\n'.join(lines) + '\n')
    assert len(verdicts) == len(lines), (len(verdicts), len(lines))
    out = ['# Match vectors: Open vSwitch 3.1 tests/ovs-ofctl.at "parse-oxm (OpenFlow 1.2)", with the',
           '# verdict of `ovs-ofctl --strict parse-oxm OpenFlow13` (regen.py). Each vector is four',
           '# lines: `< symbolic input`, `> input TLVs in hex`, and `= OVS\'s normalized TLVs in hex`',
           '# or `! OVS error name`, then `~ ` and the line ovs-ofctl printed.', '']
    for line, verdict in zip(lines, verdicts):
        out.append('< ' + line)
        out.append('> ' + symbolic_to_hex(line, headers))
        m = re.match(r'nx_pull_match\(\) returned error (\w+)', verdict)
        out.append('! ' + m.group(1) if m else '= ' + symbolic_to_hex(verdict, headers))
        out.append('~ ' + verdict)
        out.append('')
    open(HERE + '/oxm.txt', 'w').write('\n'.join(out))


def action_vectors(ovs):
    at = ovs + '/tests/ofp-actions.at'
    hexes = []
    for section in ('AT_SETUP([OpenFlow 1.0 action translation])', 'AT_SETUP([OpenFlow 1.1 action translation])',
                    'AT_SETUP([OpenFlow 1.3 action translation])'):
        data = block(at, section, '])\nsed ')
        data = data.replace('dnl\n', '')
        for line in data.splitlines():
            line = line.strip()
            if not line or line.startswith(('#', '&', 'dnl', 'AT_', '0000 0008', '0001 0008', '0002 0008',
                                            '0003 0008', '0004 0010', '0005 0010', '0006 0008',
                                            '0007 0008', '0008 0008', '0009 0008', '000a 0008',
                                            '000b 0010')) and not line.startswith('0000 0010'):
                continue
            h = re.sub(r'[^0-9a-fA-F]', '', line).lower()
            if h and len(h) % 2 == 0 and h not in hexes:
                hexes.append(h)
    verdicts = ovs_ofctl(['parse-actions', 'OpenFlow13'], '\n'.join(hexes) + '\n')
    verdicts = [v for v in verdicts if v.startswith(('actions=', 'bad '))]
    assert len(verdicts) == len(hexes), (len(verdicts), len(hexes))
    out = ['# Action vectors: Open vSwitch 3.1 tests/ofp-actions.at (OpenFlow 1.0/1.1/1.3 action',
           '# translation; OpenFlow 1.0-only action types left out), with the verdict of',
           '# `ovs-ofctl parse-actions OpenFlow13` (regen.py): `> actions in hex`, then',
           '# `= actions=...` as OVS prints them or `! OVS error name`.', '']
    for h, v in zip(hexes, verdicts):
        out.append('> ' + h)
        out.append('! ' + v.split(': ')[-1] if v.startswith('bad ') else '= ' + v)
        out.append('')
    open(HERE + '/actions.txt', 'w').write('\n'.join(out))


def instruction_vectors(ovs):
    data = block(ovs + '/tests/ofp-actions.at', 'AT_SETUP([OpenFlow 1.1 instruction translation])', '])\nsed ')
    data = data.replace('dnl\n', '')
    hexes = []
    for line in data.splitlines():
        line = line.strip()
        if not line or line.startswith(('#', '&', 'dnl', 'AT_')):
            continue
        line = line.split(',')[-1]
        h = re.sub(r'[^0-9a-fA-F]', '', line).lower()
        if h and h not in hexes:
            hexes.append(h)
    verdicts = ovs_ofctl(['parse-instructions', 'OpenFlow13'], '\n'.join(hexes) + '\n')
    verdicts = [v for v in verdicts if v.startswith(('actions=', 'bad '))]
    assert len(verdicts) == len(hexes), (len(verdicts), len(hexes))
    out = ['# Instruction vectors: Open vSwitch 3.1 tests/ofp-actions.at (OpenFlow 1.1 instruction',
           '# translation), with the verdict of `ovs-ofctl parse-instructions OpenFlow13` (regen.py).', '']
    for h, v in zip(hexes, verdicts):
        out.append('> ' + h)
        out.append('! ' + v.split(': ')[-1] if v.startswith('bad ') else '= ' + v)
        out.append('')
    open(HERE + '/instructions.txt', 'w').write('\n'.join(out))


if __name__ == '__main__':
    oxm_vectors(sys.argv[1])
    action_vectors(sys.argv[1])
    instruction_vectors(sys.argv[1])
