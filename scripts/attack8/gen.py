import sys, os
n=int(sys.argv[1])
H=b'{"version":2,"query":{"threshold":{"threshold":100000.0,"width":20000.0}},"mechanism":"polyplace","epsilon":0.0001,"delta":0.0,"value":0.5,"report_id":"'
w=sys.stdout.buffer; buf=[]
for k in range(n):
    buf.append(H + (b'%032x' % (k*0x9E3779B97F4A7C15 % (1<<128))) + b'"}\n')
    if len(buf)==100000: w.write(b''.join(buf)); buf=[]
w.write(b''.join(buf))
