from geopriv import *
import json
for (a,b,bw) in [(0.0,1.0,1e-300),(-1e300,1e300,None),(0.0,1e-300,None)]:
    g=MapGrid(x_min=a,x_max=b,y_min=a,y_max=b,points_x=2 if bw else 3,points_y=2 if bw else 3,bandwidth=bw)
    r=MapRelease(g,MapMechanism.VECTOR_LAPLACE,1.0)
    L=PrivacyLedger.in_memory(BudgetPolicy(unit=BudgetUnit.PER_METRE,total_epsilon=1e300,total_delta=0.0))
    for loc in [[a,a],[b,b],[(a+b)/2,(a+b)/2],[a,b]]:
        try: print(a,b,bw,loc, json.loads(r.release(L,loc).json)['values'])
        except GeoprivError as e: print(a,b,bw,loc,'refused',e)
