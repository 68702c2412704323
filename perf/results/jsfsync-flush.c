// 5000x (pwrite O_DIRECT + fdatasync) on a file in a directory; reports per-iteration latency.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now_us(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  const char*path=argv[1]; int n=atoi(argv[2]); int sz=atoi(argv[3]); int direct=atoi(argv[4]); int sync=atoi(argv[5]);
  int append = argc>6 ? atoi(argv[6]) : 0;
  int fd=open(path,O_RDWR|O_CREAT|O_TRUNC|(direct?O_DIRECT:0),0644); if(fd<0){perror("open");return 1;}
  void*buf; if(posix_memalign(&buf,4096,4096)) return 1; memset(buf,'x',4096);
  double*lat=malloc(sizeof(double)*n);
  double t0=now_us();
  for(int i=0;i<n;i++){double a=now_us();
    off_t off = append ? (off_t)i*sz : 0;
    if(pwrite(fd,buf,sz,off)!=sz){perror("pwrite");return 1;}
    if(sync&&fdatasync(fd)){perror("fdatasync");return 1;}
    lat[i]=now_us()-a;}
  double tot=now_us()-t0;
  qsort(lat,n,sizeof(double),cmp);
  printf("n=%d size=%d direct=%d sync=%d append=%d total=%.0fms mean=%.1fus p50=%.1f p90=%.1f p99=%.1f max=%.1f\n",n,sz,direct,sync,append,tot/1e3,tot/n,lat[n/2],lat[n*9/10],lat[n*99/100],lat[n-1]);
  close(fd); unlink(path); return 0;}
