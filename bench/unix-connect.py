# N connects to a unix socket this process serves itself (in /tmp: the jail's own), each
# accepted and closed: the cost of a connect() whole, as a client sees it.
import os, socket, sys, tempfile, threading
n = int(sys.argv[1])
d = tempfile.mkdtemp(dir="/tmp")
path = os.path.join(d, "s.sock")
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
srv.listen(128)
def serve():
    for _ in range(n):
        c, _ = srv.accept()
        c.close()
threading.Thread(target=serve, daemon=True).start()
for _ in range(n):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.close()
os.unlink(path)
os.rmdir(d)
