# fill.py: put swan.py's and f1tab.py's current outputs between the markers in docs/ATTACK-21.md
import subprocess, re, glob
p = '/work/wt-attack21/docs/ATTACK-21.md'; s = open(p).read()
sw = subprocess.run(['python3', 'swan.py'] + sorted(glob.glob('sw/*.md')), capture_output=True, text=True, cwd='/tmp/attack21').stdout
ft = subprocess.run(['python3', 'f1tab.py'], capture_output=True, text=True, cwd='/tmp/attack21').stdout
cm = subprocess.run(['python3', 'cmpold.py'], capture_output=True, text=True, cwd='/tmp/attack21').stdout
hd = subprocess.run(['python3', 'held.py', 'results-a1.jsonl'], capture_output=True, text=True, cwd='/tmp/attack21').stdout
cb = subprocess.run(['python3', 'cmpb1.py'], capture_output=True, text=True, cwd='/tmp/attack21').stdout
an = subprocess.run(['python3', 'an.py', 'results-a1.jsonl'], capture_output=True, text=True, cwd='/tmp/attack21').stdout
s5 = subprocess.run(['python3', 'sw5tab.py'], capture_output=True, text=True, cwd='/tmp/attack21').stdout
c6 = subprocess.run(['python3', 'cmpc6.py'], capture_output=True, text=True, cwd='/tmp/attack21').stdout
c7 = subprocess.run(['python3', 'cmpc7.py'], capture_output=True, text=True, cwd='/tmp/attack21').stdout
c8 = subprocess.run(['python3', 'sw8tab.py'], capture_output=True, text=True, cwd='/tmp/attack21').stdout
for key, val in (('SW8', c8.strip()), ('CMPC7', c7.strip()), ('CMPC6', c6.strip()), ('SW5', s5.strip()), ('SWAN', sw.strip()), ('F1TAB', ft.strip()), ('CMPBASE', cm.strip()), ('HELD', hd.strip()), ('CMPB1', cb.strip()), ('ANA1', an.strip())):
    block = f'<!-- {key} -->\n{val}\n<!-- /{key} -->'
    if key in s and f'<!-- {key} -->' not in s: s = s.replace(key, block, 1)
    else: s = re.sub(rf'<!-- {key} -->.*?<!-- /{key} -->', lambda m: block, s, flags=re.S)
open(p, 'w').write(s)
