import socket, sys, time, struct, threading
P=int(sys.argv[1]); cmds=sys.argv[2:]
s=socket.create_connection(('127.0.0.1',P)); f=s.makefile('rb')
def reply():
    lines=[]
    while True:
        l=f.readline().decode().rstrip('\r\n'); lines.append(l)
        if len(l)>=4 and l[3]==' ' and l[:3].isdigit(): return lines
def show(ls): print('\n'.join('S: '+x for x in ls))
show(reply())
datas=[]
lst=None
for c in cmds:
    if c.startswith('@LISTEN'):
        lst=socket.socket(); lst.bind(('127.0.0.1',0)); lst.listen(8); p=lst.getsockname()[1]
        c='PORT 127,0,0,1,%d,%d'%(p>>8,p&255)
        def acc():
            while True:
                try: cs,_=lst.accept()
                except OSError: return
                buf=b''
                cs.settimeout(3)
                try:
                    while True:
                        d=cs.recv(65536)
                        if not d: break
                        buf+=d
                except Exception: pass
                datas.append(buf)
        threading.Thread(target=acc,daemon=True).start()
    print('C: '+c); s.sendall((c+'\r\n').encode())
    r=reply(); show(r)
    while r[-1][:1] in ('1',) :
        r=reply(); show(r)
time.sleep(3.5)
for d in datas:
    i=0;bl=[]
    while i+17<=len(d):
        desc=d[i];cnt,off=struct.unpack('>QQ',d[i+1:i+17]);bl.append((hex(desc),cnt,off));i+=17+cnt
    print('conn bytes',len(d),bl)
