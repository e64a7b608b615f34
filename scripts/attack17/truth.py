# truth.py POP.csv OUT.npy [xmin xmax ymin ymax grid]: F_j = (1/n) sum_i exp(-|t_j-x_i|^2/(2h^2)), h = one cell diagonal, x index major
import sys, numpy as np
P = np.loadtxt(sys.argv[1], delimiter=",", ndmin=2)
xmin, xmax, ymin, ymax, k = (0., 20000., 0., 20000., 61) if len(sys.argv) < 4 else tuple(map(float, sys.argv[3:7])) + (int(sys.argv[7]),)
sx, sy = (xmax-xmin)/(k-1), (ymax-ymin)/(k-1); h = np.hypot(sx, sy)
gx, gy = xmin + np.arange(k)*sx, ymin + np.arange(k)*sy
F = np.zeros((k, k))
for c in range(0, len(P), 200000):
    Q = P[c:c+200000]
    ex = np.exp(-(gx[:, None]-Q[None, :, 0])**2/(2*h*h)); ey = np.exp(-(gy[:, None]-Q[None, :, 1])**2/(2*h*h))
    F += ex @ ey.T
F /= len(P)
np.save(sys.argv[2], F.reshape(-1))
